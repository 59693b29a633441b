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

// The pace says why it is where it is: growing under the target, backing off above it (to
// the floor when it stays above), recovering once the latency is back under the target, and
// at the operator's rate (the ceiling) when that binds.
func TestAdaptiveBacksOffAndRecovers(t *testing.T) {
	var a Adaptive
	now := time.Unix(1000, 0)
	const base, limit = 3 * time.Millisecond, 32 << 20 // the target becomes 6 ms
	a.Rate(limit, base, 0, now)
	step := func(lat time.Duration) PaceState {
		now = now.Add(AdaptEvery)
		a.Rate(limit, lat, 0, now)
		return a.State()
	}
	if s := step(base); s.Why != PaceGrowing || s.Rate != AdaptStart+AdaptStep || s.Target != 2*base {
		t.Fatalf("under the target: got %+v, want growing at %d with a target of %s", s, AdaptStart+AdaptStep, 2*base)
	}
	var s PaceState
	for range 10 {
		s = step(base)
	}
	if s.Why != PaceAtCeiling || s.Rate != limit {
		t.Fatalf("long under the target: got %+v, want at the ceiling %d", s, limit)
	}
	high := 9 * time.Millisecond
	if s = step(high); s.Why != PaceBackingOff || s.Rate != limit/2 || s.Latency != high {
		t.Fatalf("above the target: got %+v, want backing off to %d", s, limit/2)
	}
	// Between adjustments the state keeps the latency it acted on: why and p99 agree.
	a.Rate(limit, base, 0, now.Add(AdaptEvery/2))
	if s = a.State(); s.Why != PaceBackingOff || s.Latency != high {
		t.Fatalf("between adjustments: got %+v, want backing off at %s", s, high)
	}
	for range 10 {
		s = step(high)
	}
	if s.Why != PaceAtFloor || s.Rate != AdaptMin {
		t.Fatalf("long above the target: got %+v, want at the floor %d", s, AdaptMin)
	}
	for range 3 {
		s = step(base)
	}
	if s.Why != PaceGrowing || s.Rate != AdaptMin+3*AdaptStep {
		t.Fatalf("back under the target: got %+v, want growing to %d", s, AdaptMin+3*AdaptStep)
	}
	for range 20 {
		s = step(base)
	}
	if s.Why != PaceAtCeiling || s.Rate != limit {
		t.Errorf("recovered: got %+v, want at the ceiling %d", s, limit)
	}
}

// A node that served nothing before the streams began has no baseline: it grows until it
// sees a latency, and takes twice that as its target.
func TestAdaptiveBaselineOfNewcomer(t *testing.T) {
	var a Adaptive
	now := time.Unix(1000, 0)
	a.Rate(0, 0, 0, now)
	for range 3 {
		now = now.Add(AdaptEvery)
		a.Rate(0, 0, 0, now)
	}
	if s := a.State(); s.Why != PaceGrowing || s.Rate != AdaptStart+3*AdaptStep || s.Target != 0 {
		t.Fatalf("no latency seen: got %+v, want growing without a target", s)
	}
	now = now.Add(AdaptEvery)
	a.Rate(0, 4*time.Millisecond, 0, now)
	if s := a.State(); s.Target != 8*time.Millisecond || s.Why != PaceGrowing {
		t.Fatalf("first latency 4 ms: got %+v, want a target of 8 ms", s)
	}
	now = now.Add(AdaptEvery)
	a.Rate(0, 9*time.Millisecond, 0, now)
	if s := a.State(); s.Why != PaceBackingOff {
		t.Errorf("9 ms over the target of 8 ms: got %+v, want backing off", s)
	}
}
