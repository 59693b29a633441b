package replica

import (
	"math"
	"sync/atomic"
	"time"
)

// ewma is an exponentially weighted moving average of latencies, in
// nanoseconds. Safe for concurrent use; zero means no observation yet.
type ewma struct{ bits atomic.Uint64 }

// ewmaAlpha is the weight of a new observation.
const ewmaAlpha = 0.2

func (e *ewma) observe(d time.Duration) {
	x := float64(d)
	for {
		old := e.bits.Load()
		v := math.Float64frombits(old)
		next := x
		if v != 0 {
			next = v + ewmaAlpha*(x-v)
		}
		if e.bits.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

func (e *ewma) value() float64 { return math.Float64frombits(e.bits.Load()) }

// quantile is a decaying estimate of the q-quantile of a stream of
// latencies (frugal streaming with multiplicative steps): an observation
// above the estimate raises it by the factor 1+eta*q, one below lowers it
// by 1-eta*(1-q), so it settles where a share 1-q of observations lie
// above it and follows a shifting distribution. One word of state, safe
// for concurrent use; zero means no observation yet.
type quantile struct {
	q, eta float64
	bits   atomic.Uint64
}

func newQuantile(q float64) *quantile { return &quantile{q: q, eta: 0.1} }

func (e *quantile) observe(d time.Duration) {
	x := max(float64(d), 1)
	for {
		old := e.bits.Load()
		v := math.Float64frombits(old)
		var next float64
		switch {
		case v == 0:
			next = x
		case x > v:
			next = v * (1 + e.eta*e.q)
		case x < v:
			next = v * (1 - e.eta*(1-e.q))
		default:
			return
		}
		if e.bits.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

// value returns the current estimate; 0 before any observation.
func (e *quantile) value() time.Duration {
	return time.Duration(math.Float64frombits(e.bits.Load()))
}
