package metrics

import (
	"math"
	"sync/atomic"
	"time"
)

// rate turns a monotonically increasing counter into decayed per-second rates over a 1 s and
// a 1 min window (exponentially weighted, like the Unix load average). The counter is bumped
// on the hot path with one atomic add; tick runs from one goroutine (Run) and the rates are
// read with atomic loads by anyone.
type rate struct {
	total atomic.Uint64
	last  uint64        // total at the previous tick; owned by the ticking goroutine
	r1s   atomic.Uint64 // float64 bits
	r1m   atomic.Uint64 // float64 bits
}

func (r *rate) add(n uint64) { r.total.Add(n) }

// tick folds the events since the previous tick into the rates; dt is the time since then,
// window the time constant of the slow rate (rate1m).
func (r *rate) tick(dt, window time.Duration) {
	now := r.total.Load()
	delta := now - r.last
	r.last = now
	sec := dt.Seconds()
	if sec <= 0 {
		return
	}
	inst := float64(delta) / sec
	r.r1s.Store(math.Float64bits(decay(math.Float64frombits(r.r1s.Load()), inst, sec, 1)))
	r.r1m.Store(math.Float64bits(decay(math.Float64frombits(r.r1m.Load()), inst, sec, window.Seconds())))
}

// decay moves old toward inst by the weight an exponential window of tau seconds gives to
// the last sec seconds.
func decay(old, inst, sec, tau float64) float64 {
	alpha := 1 - math.Exp(-sec/tau)
	return old + alpha*(inst-old)
}

func (r *rate) rate1s() float64 { return math.Float64frombits(r.r1s.Load()) }
func (r *rate) rate1m() float64 { return math.Float64frombits(r.r1m.Load()) }

// carry copies the totals and rates of o into r (when the vnode table is rebuilt).
func (r *rate) carry(o *rate) {
	r.total.Store(o.total.Load())
	r.last = o.last
	r.r1s.Store(o.r1s.Load())
	r.r1m.Store(o.r1m.Load())
}
