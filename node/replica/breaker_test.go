package replica

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestBreakerTransitions(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBreaker(3, 10*time.Second)
	want := func(state BreakerState, failures int) {
		t.Helper()
		got := b.snapshot("p")
		if got.State != state || got.ConsecutiveFailures != failures {
			t.Fatalf("breaker = %s/%d, want %s/%d", got.State, got.ConsecutiveFailures, state, failures)
		}
	}
	allow := func(now time.Time, want bool) {
		t.Helper()
		if got := b.allow(now); got != want {
			t.Fatalf("allow(t0+%v) = %v, want %v", now.Sub(t0), got, want)
		}
	}

	allow(t0, true)
	b.failure(t0)
	b.failure(t0)
	want(BreakerClosed, 2)
	b.success() // a success resets the count
	want(BreakerClosed, 0)
	for range 3 {
		b.failure(t0)
	}
	want(BreakerOpen, 3)
	allow(t0.Add(9*time.Second), false) // cooling down: fail fast

	allow(t0.Add(10*time.Second), true) // the probe
	want(BreakerHalfOpen, 3)
	allow(t0.Add(10*time.Second), false) // one probe at a time
	b.failure(t0.Add(11 * time.Second))  // probe failed: open again, new cool-down
	want(BreakerOpen, 4)
	allow(t0.Add(20*time.Second), false)

	allow(t0.Add(21*time.Second), true)
	b.abandon() // probe cancelled: open, next call probes again
	want(BreakerOpen, 4)
	allow(t0.Add(21*time.Second), true)
	b.success()
	want(BreakerClosed, 0)
	allow(t0.Add(21*time.Second), true)
}

func TestQuantileEstimate(t *testing.T) {
	// Uniform latencies over 1..1000µs: the p99 is 990µs.
	q := newQuantile(0.99)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		q.observe(time.Duration(1+rng.IntN(1000)) * time.Microsecond)
	}
	if got := q.value(); got < 900*time.Microsecond || got > 1100*time.Microsecond {
		t.Errorf("p99 estimate = %v, want about 990µs", got)
	}
	// The estimate follows a shift of the distribution down.
	for range 200_000 {
		q.observe(time.Duration(1+rng.IntN(100)) * time.Microsecond)
	}
	if got := q.value(); got < 90*time.Microsecond || got > 110*time.Microsecond {
		t.Errorf("p99 estimate after shift = %v, want about 99µs", got)
	}
}

func TestEWMA(t *testing.T) {
	var e ewma
	if got := e.value(); got != 0 {
		t.Fatalf("empty ewma = %v, want 0", got)
	}
	e.observe(100)
	if got := e.value(); got != 100 {
		t.Fatalf("ewma after one = %v, want 100", got)
	}
	for range 100 {
		e.observe(200)
	}
	if got := e.value(); got < 199 || got > 200 {
		t.Errorf("ewma after 100×200 = %v, want about 200", got)
	}
}
