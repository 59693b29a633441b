package metrics

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// recent is a lock-free latency histogram over a short sliding window (RecentWindow): a ring
// of recentSlots slots of recentSlot each, every slot a count per log-scale bucket. It answers
// "what is the p99 of the last second" cheaply enough to be asked per streamed chunk, where
// the HDR windows (LatencyWindow, 5–10 s) are too slow to follow a move of a few seconds.
//
// Buckets split each power of two of microseconds into four equal parts (at most 25% wide);
// a quantile is reported as its bucket's upper bound. A slot is reset by the first recording that finds it
// holding an older period; a recording racing that reset may be lost, which a p99 over
// hundreds of samples does not notice.
type recent struct {
	slots [recentSlots]recentSlotData
	now   func() time.Time
}

// RecentWindow is the longest span a recent histogram answers for (RecentP99).
const RecentWindow = time.Second

const (
	recentSlot  = 100 * time.Millisecond
	recentSlots = 11 // the current, partial slot and the 10 before it: 1–1.1 s
	// recentBuckets covers 1 µs to 2^(recentBuckets/4) µs ≈ 68 s.
	recentBuckets = 104
)

type recentSlotData struct {
	period atomic.Int64 // which recentSlot-long period since the epoch the counts are for
	counts [recentBuckets]atomic.Uint32
}

func newRecent(now func() time.Time) *recent {
	if now == nil {
		now = time.Now
	}
	return &recent{now: now}
}

// recentBucket is the bucket of a latency of us microseconds: bucket 4e+q+1 holds
// [2^e·(1+q/4), 2^e·(1+(q+1)/4)), the q-th quarter of the octave of 2^e.
func recentBucket(us int64) int {
	if us < 1 {
		return 0
	}
	x := uint64(us)
	e := bits.Len64(x) - 1 // floor(log2(x))
	var q int
	if e >= 2 {
		q = int((x >> (e - 2)) & 3)
	} else {
		q = int((x << (2 - e)) & 3)
	}
	return min(4*e+q+1, recentBuckets-1)
}

// recentUpper is the end of bucket b's latencies (exclusive).
func recentUpper(b int) time.Duration {
	if b == 0 {
		return time.Microsecond
	}
	e, q := (b-1)/4, (b-1)%4
	us := math.Ldexp(1+float64(q+1)/4, e)
	return time.Duration(us * float64(time.Microsecond))
}

func (r *recent) record(d time.Duration) {
	p := r.now().UnixNano() / int64(recentSlot)
	s := &r.slots[p%recentSlots]
	old := s.period.Load()
	if old > p {
		return // a recorder stalled past a whole window: its period is gone, drop the sample
	}
	if old < p && s.period.CompareAndSwap(old, p) {
		for i := range s.counts {
			s.counts[i].Store(0)
		}
	}
	s.counts[recentBucket(d.Microseconds())].Add(1)
}

// quantile returns the q-quantile (0 < q < 1) of the latencies recorded over the last span
// (rounded up to whole slots, at most the window, the current partial slot included), and how
// many there were; 0, 0 when there were none.
func (r *recent) quantile(q float64, span time.Duration) (time.Duration, uint64) {
	p := r.now().UnixNano() / int64(recentSlot)
	ages := min(int64((span+recentSlot-1)/recentSlot)+1, recentSlots)
	var counts [recentBuckets]uint64
	var total uint64
	for i := range r.slots {
		s := &r.slots[i]
		if age := p - s.period.Load(); age < 0 || age >= ages {
			continue
		}
		for b := range s.counts {
			n := uint64(s.counts[b].Load())
			counts[b] += n
			total += n
		}
	}
	if total == 0 {
		return 0, 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for b, n := range counts {
		seen += n
		if seen >= rank {
			return recentUpper(b), total
		}
	}
	return recentUpper(recentBuckets - 1), total
}
