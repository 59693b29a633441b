package metrics

import (
	"math"
	"runtime/metrics"
	"sync"
	"time"
)

// schedLatencies is the runtime's histogram of how long goroutines waited to run once
// runnable.
const schedLatencies = "/sched/latencies:seconds"

// schedEvery is how often SchedWait reads the runtime's histogram at most.
const schedEvery = 100 * time.Millisecond

// SchedWait is the p99 of how long this process's goroutines waited to run once runnable
// (runtime/metrics /sched/latencies:seconds) over about the last Span: the CPU pressure the
// node's requests queue behind, seen in every goroutine wake-up (thousands a second) where a
// client p99 over the same half second has a few hundred samples, or none on a node without
// clients. A ring change's pace reads it beside the client p99. The zero SchedWait is not
// ready: use NewSchedWait. Safe for concurrent use.
type SchedWait struct {
	span time.Duration

	mu     sync.Mutex
	sample []metrics.Sample
	snaps  []schedSnap // oldest first; the first is the base of the span
	p99    time.Duration
}

type schedSnap struct {
	at     time.Time
	counts []uint64
}

// NewSchedWait returns a SchedWait over span (at least 100 ms).
func NewSchedWait(span time.Duration) *SchedWait {
	return &SchedWait{span: max(span, schedEvery), sample: []metrics.Sample{{Name: schedLatencies}}}
}

// P99 returns the p99 of the goroutines' wait to run over about the last span (0 until two
// readings span some time, or without wake-ups since).
func (w *SchedWait) P99() time.Duration {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.snaps); n > 0 && now.Sub(w.snaps[n-1].at) < schedEvery {
		return w.p99
	}
	metrics.Read(w.sample)
	if w.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := w.sample[0].Value.Float64Histogram()
	w.snaps = append(w.snaps, schedSnap{at: now, counts: append([]uint64(nil), h.Counts...)})
	// Keep one reading at or before the span's start as its base.
	for len(w.snaps) > 2 && !w.snaps[1].at.After(now.Add(-w.span)) {
		w.snaps = w.snaps[1:]
	}
	w.p99 = 0
	if len(w.snaps) >= 2 {
		w.p99 = deltaQuantile(w.snaps[0].counts, w.snaps[len(w.snaps)-1].counts, h.Buckets, 0.99)
	}
	return w.p99
}

// deltaQuantile is the q-quantile of the counts added between two readings of a cumulative
// histogram with bucket boundaries buckets (seconds; len(counts)+1), reported as its bucket's
// upper bound; 0 when nothing was added.
func deltaQuantile(from, to []uint64, buckets []float64, q float64) time.Duration {
	var total uint64
	for i := range to {
		if i < len(from) {
			total += to[i] - from[i]
		} else {
			total += to[i]
		}
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i := range to {
		d := to[i]
		if i < len(from) {
			d -= from[i]
		}
		seen += d
		if seen >= rank {
			up := buckets[i+1]
			if math.IsInf(up, 1) {
				up = buckets[i]
			}
			return time.Duration(up * float64(time.Second))
		}
	}
	return 0
}
