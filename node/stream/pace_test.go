package stream

import (
	"testing"
	"time"
)

// A changed rate reprices the wait booked and not yet paid for, instead of forgiving it.
func TestLimiterReprices(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name     string
		from, to uint64
		at       time.Duration // when the second chunk is booked, after the first
		want     time.Duration // its wait: what is left of the first, repriced, and its own
	}{
		{"same rate", mib, mib, 0, 2 * time.Second},
		{"doubled", mib, 2 * mib, 0, time.Second},
		{"halved", 2 * mib, mib, 0, 2 * time.Second},
		{"quartered, half paid", 4 * mib, mib, 125 * time.Millisecond, 1500 * time.Millisecond},
		{"doubled, half paid", mib, 2 * mib, 500 * time.Millisecond, 750 * time.Millisecond},
		{"lifted", mib, 0, 0, 0},
		{"from none", 0, mib, 0, time.Second},
		{"all paid", mib, 2 * mib, 3 * time.Second, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l Limiter
			now := time.Unix(1000, 0)
			l.book(mib, tc.from, now)
			if got := l.book(mib, tc.to, now.Add(tc.at)); got != tc.want {
				t.Errorf("got a wait of %s, want %s", got, tc.want)
			}
		})
	}
}

// The adaptive pace halves when the latency rises above the target and grows back step by
// step below it, within the operator's rate.
func TestAdaptiveRate(t *testing.T) {
	var a Adaptive
	now := time.Unix(1000, 0)
	const base = 3 * time.Millisecond // the target becomes 6 ms
	if got := a.Rate(0, base, 0, now); got != AdaptStart {
		t.Fatalf("first rate: got %d, want %d", got, AdaptStart)
	}
	step := func(lat time.Duration, limit uint64) uint64 {
		now = now.Add(AdaptEvery)
		return a.Rate(limit, lat, 0, now)
	}
	if got, want := step(base, 0), uint64(AdaptStart+AdaptStep); got != want {
		t.Errorf("under the target: got %d, want %d", got, want)
	}
	if got, want := step(20*time.Millisecond, 0), uint64(AdaptStart+AdaptStep)/2; got != want {
		t.Errorf("above the target: got %d, want %d", got, want)
	}
	for range 10 {
		step(time.Second, 0)
	}
	if got := step(time.Second, 0); got != AdaptMin {
		t.Errorf("long above the target: got %d, want the floor %d", got, AdaptMin)
	}
	for range 100 {
		step(base, 0)
	}
	if got := step(base, 16<<20); got != 16<<20 {
		t.Errorf("with an operator's rate of 16 MiB/s: got %d", got)
	}
	if got, want := step(6*time.Millisecond, 16<<20), uint64(16<<20); got != want {
		t.Errorf("at the target: got %d, want %d (no decrease)", got, want)
	}
	// After a pause the pulls start again low, with a new baseline.
	now = now.Add(AdaptIdle + time.Second)
	if got := a.Rate(0, 50*time.Millisecond, 0, now); got != AdaptStart {
		t.Errorf("after a pause: got %d, want %d", got, AdaptStart)
	}
	if got := step(80*time.Millisecond, 0); got != AdaptStart+AdaptStep {
		t.Errorf("under the new target of 100 ms: got %d, want %d", got, AdaptStart+AdaptStep)
	}
}
