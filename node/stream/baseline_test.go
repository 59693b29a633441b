package stream

import (
	"testing"
	"time"
)

// The baseline is the median of the last seconds: one spike among them does not set the
// target, as one second's p99 at the start of the streams did.
func TestBaselineIgnoresASpike(t *testing.T) {
	var b Baseline
	if got := b.Median(); got != 0 {
		t.Fatalf("no samples: got %s, want 0", got)
	}
	ms := time.Millisecond
	for _, l := range []time.Duration{18 * ms, 16 * ms, 0, 9 * ms, 18 * ms, 54 * ms, 135 * ms, 12 * ms, 8 * ms, 38 * ms, 71 * ms, 196 * ms} {
		b.Observe(l)
	}
	// The last ten non-zero: 16 9 18 54 135 12 8 38 71 196 → sorted 8 9 12 16 18 38 54 71 135 196.
	if got, want := b.Median(), 38*ms; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got, want := Target(0, b.Median), 57*ms; got != want {
		t.Errorf("auto target: got %s, want %s", got, want)
	}
	if got, want := Target(6*ms, b.Median), 6*ms; got != want {
		t.Errorf("the operator's target: got %s, want %s", got, want)
	}
	var a Adaptive
	a.Rate(0, Signals{Latency: 196 * ms}, Target(0, b.Median), time.Unix(1000, 0))
	if s := a.State(); s.Target != 57*ms {
		t.Errorf("the pace's target at a spike: got %s, want 1.5 times the baseline %s", s.Target, 57*ms)
	}
}
