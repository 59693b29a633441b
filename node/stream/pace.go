package stream

import (
	"context"
	"sync"
	"time"
)

// Limiter paces streams together to a byte rate: a RangeClient's pulls (the receiver's
// budget) or a Replica's streams paced by its latency (the source's). Each chunk books its
// bytes at the rate after those booked before it (by any stream), and its stream sleeps until
// its booking ends. A changed rate reprices what is booked and not yet paid for: halving the
// rate doubles the waits left, lifting it (0) ends them.
type Limiter struct {
	mu   sync.Mutex
	rate uint64
	next time.Time // when the bytes booked so far have been paid for
}

// limiterSlice bounds one sleep, so that a stream notices a changed rate soon.
const limiterSlice = 250 * time.Millisecond

func (l *Limiter) book(n int, rate uint64, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rate != l.rate {
		l.next = now.Add(repriced(l.next.Sub(now), l.rate, rate))
		l.rate = rate
	}
	if l.next.Before(now) {
		l.next = now
	}
	if rate == 0 {
		return 0
	}
	l.next = l.next.Add(time.Duration(float64(n) / float64(rate) * float64(time.Second)))
	return l.next.Sub(now)
}

// repriced is a wait of d booked at rate from, at rate to instead (0 = no wait).
func repriced(d time.Duration, from, to uint64) time.Duration {
	if d <= 0 || from == 0 || to == 0 {
		return 0
	}
	return time.Duration(float64(d) * float64(from) / float64(to))
}

// Wait books n bytes and sleeps until they are paid for, repriced when the rate changes.
// rate is read again after every slice of the sleep; sleep nil = a timer. The zero Limiter
// is ready; it is safe for concurrent use.
func (l *Limiter) Wait(ctx context.Context, n int, rate func() uint64, sleep func(ctx context.Context, d time.Duration) error) error {
	r := rate()
	d := l.book(n, r, time.Now())
	for d > 0 {
		step := min(d, limiterSlice)
		if sleep != nil {
			if err := sleep(ctx, step); err != nil {
				return err
			}
		} else {
			tm := time.NewTimer(step)
			select {
			case <-ctx.Done():
				tm.Stop()
				return ctx.Err()
			case <-tm.C:
			}
		}
		d -= step
		if r2 := rate(); r2 != r {
			d, r = repriced(d, r, r2), r2
		}
	}
	return nil
}

// The Adaptive pace (RangeClient.Latency, server.ReplicaDeps.Latency) works as TCP's
// congestion control, with the node's latency as the loss signal and one AdaptWindow as the
// round trip:
//   - slow start: a run of streams starts at AdaptStart and doubles once per window while what
//     the node saw over that whole window, at that pace, holds: its p99 at or under the target
//     and its goroutines' wait to run (CPUWait) at or under half of it;
//   - the first window that does not hold halves the pace at once — at the chunk that sees it,
//     within a window of its cause — and ends slow start; the pace then holds a window, so that
//     its next decision reads what the node saw at the lower pace, not at the one it left;
//   - after the first back-off it grows by AdaptStep per window that holds;
//   - never above the operator's rate (the ceiling), never below AdaptMin.
//
// Without a target given, the target is AdaptTargetFactor times the latency before the
// streams (Baseline), or, on a node that saw none then (a newcomer), times the first latency
// it sees. A factor under 2 leaves room for the overshoot of one window: the goal is a client
// p99 within twice its value before.
const (
	AdaptStart  = 1 << 20
	AdaptStep   = 1 << 20
	AdaptMin    = 256 << 10
	AdaptMax    = 256 << 20
	AdaptWindow = 500 * time.Millisecond
	AdaptIdle   = 10 * time.Second
	// AdaptTargetFactor times the latency before is the auto target.
	AdaptTargetFactor = 1.5
)

// Signals is what a node sees of its own load, which its Adaptive pace reads.
type Signals struct {
	// Latency is the p99 of the node's requests over about the last AdaptWindow (0: too
	// few to tell).
	Latency time.Duration
	// CPUWait is the p99 of its goroutines' wait to run over about the last AdaptWindow (0:
	// not measured): it rises with the CPU pressure before the requests' p99 does, and does
	// not need requests.
	CPUWait time.Duration
}

// ReadSignals returns the Signals that latency and cpuWait (nil: not measured) read now.
func ReadSignals(latency, cpuWait func() time.Duration) Signals {
	s := Signals{Latency: latency()}
	if cpuWait != nil {
		s.CPUWait = cpuWait()
	}
	return s
}

// Adaptive is the AIMD state of the streams one node paces together by its latency: a
// RangeClient's pulls, or the streams a Replica serves.
type Adaptive struct {
	mu      sync.Mutex
	cur     uint64        // bytes per second; 0 before the first pull
	target  time.Duration // 0 while auto without a baseline: no latency seen yet
	auto    bool          // the target follows the latency seen first
	slow    bool          // slow start: no back-off yet in this run
	changed time.Time     // when cur last changed (or the run began)
	used    time.Time     // last call
	sig     Signals       // at the last decision
	limit   uint64
	why     PaceWhy
	byCPU   bool // the last back-off (or hold) was for the CPU wait
}

// PaceWhy says what the adaptive pace last did.
type PaceWhy int

// What the pace did at its last decision.
const (
	// PaceGrowing: the last window held; the pace grows by a step per window.
	PaceGrowing PaceWhy = iota + 1
	// PaceAtCeiling: the last window held and the pace is the operator's rate.
	PaceAtCeiling
	// PaceBackingOff: the last window did not hold; the pace halved.
	PaceBackingOff
	// PaceAtFloor: the last window did not hold and the pace is at AdaptMin.
	PaceAtFloor
	// PaceSlowStart: no back-off yet; the pace doubles per window that holds.
	PaceSlowStart
	// PaceHolding: the pace halved less than a window ago; it waits for a window measured at
	// the new pace before it decides again.
	PaceHolding
)

// PaceState is an Adaptive's pace and why, for the operator.
type PaceState struct {
	Rate    uint64 // bytes per second
	Limit   uint64 // the operator's rate, the ceiling (0 = none: AdaptMax)
	Latency time.Duration
	CPUWait time.Duration
	Target  time.Duration
	Why     PaceWhy
	// ByCPU: the back-off (or hold) was for the goroutines' wait to run, not the p99.
	ByCPU bool
	Used  time.Time // when the pace was last asked for
}

// congested says whether sig breaks target: the p99 above it, or the goroutines' wait to run
// above half of it (a request waits to run several times); and whether the CPU wait alone did.
func congested(sig Signals, target time.Duration) (over, byCPU bool) {
	if target <= 0 {
		return false, false
	}
	if sig.Latency > target {
		return true, false
	}
	if sig.CPUWait > target/2 {
		return true, true
	}
	return false, false
}

// Rate returns the pace now given the operator's limit (0 = none) and what the node sees.
// The zero Adaptive is ready; it is safe for concurrent use.
func (a *Adaptive) Rate(limit uint64, sig Signals, target time.Duration, now time.Time) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == 0 || now.Sub(a.used) > AdaptIdle {
		// A new run of streams: start low, in slow start, with the latency before them as
		// the baseline.
		a.cur, a.changed, a.target, a.why, a.sig, a.slow, a.byCPU = AdaptStart, now, target, PaceSlowStart, sig, true, false
		a.auto = target <= 0
		if a.auto && sig.Latency > 0 {
			a.target = autoTarget(sig.Latency)
		}
	}
	if a.auto && a.target <= 0 && sig.Latency > 0 {
		// A node that served nothing before the streams began (a newcomer) takes the first
		// latency it sees, at the low starting pace, as its baseline.
		a.target = autoTarget(sig.Latency)
	}
	a.used, a.limit = now, limit
	ceiling := uint64(AdaptMax)
	if limit > 0 {
		ceiling = max(limit, AdaptMin)
	}
	a.cur = min(a.cur, ceiling)
	over, byCPU := congested(sig, a.target)
	switch {
	case over && now.Sub(a.changed) >= AdaptWindow || over && a.why != PaceHolding && a.why != PaceBackingOff && a.why != PaceAtFloor:
		// Back off at once, unless this pace is the one a back-off set less than a window
		// ago: what the node sees then is still the pace it left.
		a.sig, a.slow, a.byCPU, a.changed = sig, false, byCPU, now
		if a.cur/2 <= AdaptMin {
			a.cur, a.why = AdaptMin, PaceAtFloor
		} else {
			a.cur, a.why = a.cur/2, PaceBackingOff
		}
	case over:
		a.why = PaceHolding
	case now.Sub(a.changed) >= AdaptWindow:
		// A whole window at this pace held: grow.
		a.sig, a.byCPU, a.changed = sig, false, now
		if a.slow {
			a.cur, a.why = min(2*a.cur, ceiling), PaceSlowStart
		} else {
			a.cur, a.why = min(a.cur+AdaptStep, ceiling), PaceGrowing
		}
		if a.cur >= ceiling {
			a.why = PaceAtCeiling
		}
	case a.why == PaceBackingOff || a.why == PaceAtFloor:
		// Under the target again after a back-off: hold the rest of the window.
		a.why = PaceHolding
	}
	if limit > 0 && a.cur > limit {
		return limit // an operator's rate under the floor
	}
	return a.cur
}

func autoTarget(lat time.Duration) time.Duration {
	return time.Duration(AdaptTargetFactor * float64(max(lat, time.Millisecond)))
}

// State is the pace last returned by Rate and why (the zero PaceState before the first call).
func (a *Adaptive) State() PaceState {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.cur
	if a.limit > 0 && r > a.limit {
		r = a.limit
	}
	return PaceState{Rate: r, Limit: a.limit, Latency: a.sig.Latency, CPUWait: a.sig.CPUWait, Target: a.target, Why: a.why,
		ByCPU: a.byCPU, Used: a.used}
}

// Current is the pace last returned by Rate (0 before the first call).
func (a *Adaptive) Current() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur
}
