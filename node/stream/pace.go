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

// The Adaptive pace (RangeClient.Latency, server.ReplicaDeps.Latency): it starts at AdaptStart,
// adds AdaptStep every AdaptEvery while the latency stays at or under the target, halves when
// above it, and stays within [AdaptMin, the operator's rate or AdaptMax]. Without a target
// given, the target is twice the latency seen when the streams began (after AdaptIdle without
// any), or, on a node that saw none then (a newcomer), twice the first latency it sees.
const (
	AdaptStart = 8 << 20
	AdaptStep  = 4 << 20
	AdaptMin   = 1 << 20
	AdaptMax   = 256 << 20
	AdaptEvery = 100 * time.Millisecond
	AdaptIdle  = 10 * time.Second
)

// Adaptive is the AIMD state of the streams one node paces together by its latency: a
// RangeClient's pulls, or the streams a Replica serves.
type Adaptive struct {
	mu       sync.Mutex
	cur      uint64        // bytes per second; 0 before the first pull
	target   time.Duration // 0 while auto without a baseline: no latency seen yet
	auto     bool          // the target is twice the latency seen first
	adjusted time.Time
	used     time.Time     // last call
	lat      time.Duration // at the last adjustment
	limit    uint64
	why      PaceWhy
}

// PaceWhy says what the adaptive pace last did.
type PaceWhy int

// What the pace did at its last adjustment.
const (
	// PaceGrowing: the latency is at or under the target; the pace grows step by step.
	PaceGrowing PaceWhy = iota + 1
	// PaceAtCeiling: the latency is at or under the target and the pace is the operator's rate.
	PaceAtCeiling
	// PaceBackingOff: the latency is above the target; the pace halves.
	PaceBackingOff
	// PaceAtFloor: the latency is above the target and the pace is at AdaptMin.
	PaceAtFloor
)

// PaceState is an Adaptive's pace and why, for the operator.
type PaceState struct {
	Rate    uint64 // bytes per second
	Limit   uint64 // the operator's rate, the ceiling (0 = none: AdaptMax)
	Latency time.Duration
	Target  time.Duration
	Why     PaceWhy
	Used    time.Time // when the pace was last asked for
}

// Rate returns the pace now given the operator's limit (0 = none) and the latency seen. The
// zero Adaptive is ready; it is safe for concurrent use.
func (a *Adaptive) Rate(limit uint64, lat, target time.Duration, now time.Time) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == 0 || now.Sub(a.used) > AdaptIdle {
		// A new run of pulls: start low, and take the latency before them as the baseline.
		a.cur, a.adjusted, a.target, a.why, a.lat = AdaptStart, now, target, PaceGrowing, lat
		a.auto = target <= 0
		if a.auto && lat > 0 {
			a.target = 2 * max(lat, time.Millisecond)
		}
	}
	if a.auto && a.target <= 0 && lat > 0 {
		// A node that served nothing before the streams began (a newcomer) takes the first
		// latency it sees, at the low starting pace, as its baseline.
		a.target = 2 * max(lat, time.Millisecond)
	}
	a.used, a.limit = now, limit
	if now.Sub(a.adjusted) >= AdaptEvery {
		// The latency the pace last acted on: what State reports beside why.
		a.adjusted, a.lat = now, lat
		switch {
		case a.target > 0 && lat > a.target && a.cur/2 <= AdaptMin:
			a.cur, a.why = AdaptMin, PaceAtFloor
		case a.target > 0 && lat > a.target:
			a.cur, a.why = a.cur/2, PaceBackingOff
		default:
			a.cur, a.why = min(a.cur+AdaptStep, AdaptMax), PaceGrowing
		}
	}
	ceiling := uint64(AdaptMax)
	if limit > 0 {
		ceiling = limit
	}
	if a.cur >= ceiling && a.why == PaceGrowing {
		a.why = PaceAtCeiling
	}
	if limit > 0 && a.cur > limit {
		a.cur = max(limit, AdaptMin)
		return limit
	}
	return a.cur
}

// State is the pace last returned by Rate and why (the zero PaceState before the first call).
func (a *Adaptive) State() PaceState {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.cur
	if a.limit > 0 && r > a.limit {
		r = a.limit
	}
	return PaceState{Rate: r, Limit: a.limit, Latency: a.lat, Target: a.target, Why: a.why, Used: a.used}
}

// Current is the pace last returned by Rate (0 before the first call).
func (a *Adaptive) Current() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur
}
