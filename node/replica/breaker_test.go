package replica

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestBreakerTransitions(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		name   string
		do     func(b *breaker)
		state  BreakerState
		fails  int
		reason string
	}
	fail := func(at time.Duration, dead bool, reason string) func(*breaker) {
		return func(b *breaker) { b.failure(t0.Add(at), dead, reason) }
	}
	reachable := func(b *breaker) { b.reachable(b.epoch()) }
	var before uint64 // an epoch read while the breaker was closed
	look := func(b *breaker) { before = b.epoch() }
	stale := func(b *breaker) { b.reachable(before) }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"dead failures open it", []step{
			{"refused", fail(0, true, "refused"), BreakerClosed, 1, "refused"},
			{"refused", fail(0, true, "refused"), BreakerClosed, 2, "refused"},
			{"a success resets the count", (*breaker).success, BreakerClosed, 0, ""},
			{"refused", fail(time.Second, true, "refused"), BreakerClosed, 1, "refused"},
			{"refused", fail(time.Second, true, "refused"), BreakerClosed, 2, "refused"},
			{"third refusal: open", fail(time.Second, true, "reset"), BreakerOpen, 3, "reset"},
			{"more failures keep it open", fail(2*time.Second, false, "slow"), BreakerOpen, 4, "slow"},
			{"the connection turns ready: closed", reachable, BreakerClosed, 0, ""},
		}},
		{"one slow spell does not open it", []step{
			{"miss", fail(0, false, "deadline"), BreakerClosed, 1, "deadline"},
			{"miss", fail(time.Second, false, "deadline"), BreakerClosed, 2, "deadline"},
			{"K misses within the spell: still closed", fail(2*time.Second, false, "deadline"), BreakerClosed, 3, "deadline"},
			{"more misses within the spell", fail(4*time.Second, false, "deadline"), BreakerClosed, 4, "deadline"},
			{"misses spanning the spell: open", fail(5*time.Second, false, "deadline"), BreakerOpen, 5, "deadline"},
			{"a probe answers: closed", reachable, BreakerClosed, 0, ""},
		}},
		{"a sign of life seen before it opened does not close it", []step{
			{"the watcher reads READY", look, BreakerClosed, 0, ""},
			{"refused", fail(0, true, "refused"), BreakerClosed, 1, "refused"},
			{"refused", fail(0, true, "refused"), BreakerClosed, 2, "refused"},
			{"refused: open", fail(0, true, "refused"), BreakerOpen, 3, "refused"},
			{"the READY read before: still open", stale, BreakerOpen, 3, "refused"},
			{"a READY read now: closed", reachable, BreakerClosed, 0, ""},
			{"the watcher reads READY again", look, BreakerClosed, 0, ""},
			{"reset", fail(time.Second, true, "reset"), BreakerClosed, 1, "reset"},
			{"reset", fail(time.Second, true, "reset"), BreakerClosed, 2, "reset"},
			{"reset: open again", fail(time.Second, true, "reset"), BreakerOpen, 3, "reset"},
			{"a probe answered before the second opening: still open", stale, BreakerOpen, 3, "reset"},
		}},
		{"a dead failure after slow ones opens it", []step{
			{"miss", fail(0, false, "deadline"), BreakerClosed, 1, "deadline"},
			{"miss", fail(0, false, "deadline"), BreakerClosed, 2, "deadline"},
			{"refused", fail(0, true, "refused"), BreakerOpen, 3, "refused"},
			{"a call that goes through anyway succeeds: closed", (*breaker).success, BreakerClosed, 0, ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBreaker(3, 5*time.Second)
			for i, s := range tc.steps {
				s.do(b)
				got := b.snapshot("p")
				if got.State != s.state || got.ConsecutiveFailures != s.fails || got.Reason != s.reason {
					t.Fatalf("step %d (%s): got %s/%d/%q, want %s/%d/%q", i, s.name,
						got.State, got.ConsecutiveFailures, got.Reason, s.state, s.fails, s.reason)
				}
				if open := got.State == BreakerOpen; b.allow() == open || got.Since.IsZero() != !open {
					t.Fatalf("step %d (%s): allow %v, since %v with state %s", i, s.name, b.allow(), got.Since, got.State)
				}
			}
		})
	}
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
