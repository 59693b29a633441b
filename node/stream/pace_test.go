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

// The adaptive pace starts slow and doubles per window that holds (slow start); the first
// window over the target halves it at once; it then holds a window and grows a step per
// window; always within the operator's rate.
func TestAdaptiveRate(t *testing.T) {
	var a Adaptive
	now := time.Unix(1000, 0)
	const base = 4 * time.Millisecond // the target becomes 6 ms
	ok, high := Signals{Latency: base}, Signals{Latency: 20 * time.Millisecond}
	at := func(d time.Duration, sig Signals, limit uint64) uint64 {
		now = now.Add(d)
		return a.Rate(limit, sig, 0, now)
	}
	if got := at(0, ok, 0); got != AdaptStart {
		t.Fatalf("first rate: got %d, want %d", got, AdaptStart)
	}
	if got := at(AdaptWindow/2, ok, 0); got != AdaptStart {
		t.Errorf("half a window in: got %d, want %d (no decision before a whole window)", got, AdaptStart)
	}
	for i, want := range []uint64{2 * AdaptStart, 4 * AdaptStart, 8 * AdaptStart} {
		if got := at(AdaptWindow, ok, 0); got != want {
			t.Errorf("slow start, window %d: got %d, want %d", i+1, got, want)
		}
	}
	// Over the target a tenth of a window after the last growth: halve at once.
	if got, want := at(AdaptWindow/10, high, 0), uint64(4*AdaptStart); got != want {
		t.Errorf("above the target: got %d, want %d", got, want)
	}
	// Still over, within the window after the back-off: hold (what is seen is the old pace).
	if got, want := at(AdaptWindow/2, high, 0), uint64(4*AdaptStart); got != want || a.State().Why != PaceHolding {
		t.Errorf("within the window after a back-off: got %d (%v), want %d holding", got, a.State().Why, want)
	}
	// Over a whole window at the new pace: halve again.
	if got, want := at(AdaptWindow/2, high, 0), uint64(2*AdaptStart); got != want {
		t.Errorf("a window later, still above: got %d, want %d", got, want)
	}
	// Under the target: no more slow start, a step per window.
	if got, want := at(AdaptWindow, ok, 0), uint64(2*AdaptStart+AdaptStep); got != want {
		t.Errorf("after the back-off, under the target: got %d, want %d", got, want)
	}
	for range 100 {
		at(AdaptWindow, ok, 0)
	}
	if got := at(AdaptWindow, ok, 16<<20); got != 16<<20 {
		t.Errorf("with an operator's rate of 16 MiB/s: got %d", got)
	}
	if got, want := at(AdaptWindow, Signals{Latency: 6 * time.Millisecond}, 16<<20), uint64(16<<20); got != want {
		t.Errorf("at the target: got %d, want %d (no decrease)", got, want)
	}
	if got := at(AdaptWindow, ok, 128<<10); got != 128<<10 {
		t.Errorf("with an operator's rate under the floor: got %d, want it", got)
	}
	// After a pause the streams start again low, in slow start, with a new baseline.
	if got := at(AdaptIdle+time.Second, Signals{Latency: 50 * time.Millisecond}, 0); got != AdaptStart || a.State().Why != PaceSlowStart {
		t.Errorf("after a pause: got %d (%v), want %d in slow start", got, a.State().Why, AdaptStart)
	}
	if got := at(AdaptWindow, Signals{Latency: 70 * time.Millisecond}, 0); got != 2*AdaptStart {
		t.Errorf("under the new target of 75 ms: got %d, want %d", got, 2*AdaptStart)
	}
}

// The goroutines' wait to run counts as a breach of the target above half of it, even with
// the p99 under it, and the pace says so.
func TestAdaptiveBacksOffByCPUWait(t *testing.T) {
	var a Adaptive
	now := time.Unix(1000, 0)
	const target = 10 * time.Millisecond
	a.Rate(0, Signals{Latency: 2 * time.Millisecond, CPUWait: time.Millisecond}, target, now)
	now = now.Add(AdaptWindow)
	if got := a.Rate(0, Signals{Latency: 2 * time.Millisecond, CPUWait: 4 * time.Millisecond}, target, now); got != 2*AdaptStart {
		t.Fatalf("CPU wait under half the target: got %d, want %d", got, 2*AdaptStart)
	}
	now = now.Add(AdaptWindow / 5)
	got := a.Rate(0, Signals{Latency: 3 * time.Millisecond, CPUWait: 6 * time.Millisecond}, target, now)
	if s := a.State(); got != AdaptStart || s.Why != PaceBackingOff || !s.ByCPU || s.CPUWait != 6*time.Millisecond {
		t.Errorf("CPU wait above half the target: got %d, %+v; want %d backing off by CPU", got, s, AdaptStart)
	}
}

// The pace says why it is where it is: slow start, backing off above the target (to the
// floor when it stays above), holding after a back-off, growing once the latency is back
// under the target, and at the operator's rate (the ceiling) when that binds.
func TestAdaptiveBacksOffAndRecovers(t *testing.T) {
	var a Adaptive
	now := time.Unix(1000, 0)
	const base, limit = 4 * time.Millisecond, 32 << 20 // the target becomes 6 ms
	a.Rate(limit, Signals{Latency: base}, 0, now)
	step := func(lat time.Duration) PaceState {
		now = now.Add(AdaptWindow)
		a.Rate(limit, Signals{Latency: lat}, 0, now)
		return a.State()
	}
	if s := step(base); s.Why != PaceSlowStart || s.Rate != 2*AdaptStart || s.Target != 6*time.Millisecond {
		t.Fatalf("under the target: got %+v, want slow start at %d with a target of 6 ms", s, 2*AdaptStart)
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
	// Within the window after the back-off the state keeps the latency it acted on.
	a.Rate(limit, Signals{Latency: base}, 0, now.Add(AdaptWindow/2))
	if s = a.State(); s.Why != PaceHolding || s.Latency != high || s.Rate != limit/2 {
		t.Fatalf("within the window after a back-off: got %+v, want holding at %s", s, high)
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
	for range 40 {
		s = step(base)
	}
	if s.Why != PaceAtCeiling || s.Rate != limit {
		t.Errorf("recovered: got %+v, want at the ceiling %d", s, limit)
	}
}

// A node that served nothing before the streams began has no baseline: it grows until it
// sees a latency, and takes AdaptTargetFactor times that as its target.
func TestAdaptiveBaselineOfNewcomer(t *testing.T) {
	var a Adaptive
	now := time.Unix(1000, 0)
	a.Rate(0, Signals{}, 0, now)
	for range 3 {
		now = now.Add(AdaptWindow)
		a.Rate(0, Signals{}, 0, now)
	}
	if s := a.State(); s.Why != PaceSlowStart || s.Rate != 8*AdaptStart || s.Target != 0 {
		t.Fatalf("no latency seen: got %+v, want slow start without a target", s)
	}
	now = now.Add(AdaptWindow)
	a.Rate(0, Signals{Latency: 4 * time.Millisecond}, 0, now)
	if s := a.State(); s.Target != 6*time.Millisecond || s.Why != PaceSlowStart {
		t.Fatalf("first latency 4 ms: got %+v, want a target of 6 ms", s)
	}
	now = now.Add(AdaptWindow / 10)
	a.Rate(0, Signals{Latency: 9 * time.Millisecond}, 0, now)
	if s := a.State(); s.Why != PaceBackingOff {
		t.Errorf("9 ms over the target of 6 ms: got %+v, want backing off", s)
	}
}
