package kvpb

import (
	"math"
	"math/bits"
	"time"
)

// The bucket layout of a LatencyHistogram, the same for the node that records and for kvctl
// and the console that merge and read: log-linear over microseconds. Below 4 µs a bucket per
// microsecond, then LatencySubBuckets buckets per power of two (each at most 25% wide, so a
// quantile read from them is within 25% of the truth), up to 2^24 µs (16.8 s); longer
// latencies count in the last bucket. 92 buckets: 368 bytes as uint32 counters.
const (
	LatencySubBuckets = 4
	LatencyBuckets    = 92
	latencyTopUS      = 1<<24 - 1
)

// MinLatencySamples is the fewest samples a latency quantile is shown for: below it kvctl and
// the console print "–" (a p99 over a handful of samples is the maximum, not a percentile).
const MinLatencySamples = 50

// LatencyBucket returns the bucket of a latency of us microseconds.
func LatencyBucket(us uint64) int {
	if us < LatencySubBuckets {
		return int(us)
	}
	us = min(us, latencyTopUS)
	e := bits.Len64(us) - 1 // >= 2
	sub := (us >> (e - 2)) & (LatencySubBuckets - 1)
	return (e-1)*LatencySubBuckets + int(sub)
}

// LatencyBucketBounds returns bucket i's range [lo, hi) in microseconds.
func LatencyBucketBounds(i int) (lo, hi uint64) {
	if i < LatencySubBuckets {
		return uint64(i), uint64(i) + 1
	}
	e := i/LatencySubBuckets + 1
	sub := uint64(i % LatencySubBuckets)
	return (LatencySubBuckets + sub) << (e - 2), (LatencySubBuckets + sub + 1) << (e - 2)
}

// NewLatencyHistogram returns the histogram of dense counts (LatencyBuckets of them, or
// fewer), trimmed to the buckets from the first to the last non-zero one.
func NewLatencyHistogram(counts []uint64, maxUS, errors uint64) *LatencyHistogram {
	lo, hi := 0, len(counts)
	for lo < hi && counts[lo] == 0 {
		lo++
	}
	for hi > lo && counts[hi-1] == 0 {
		hi--
	}
	h := &LatencyHistogram{First: uint32(lo), MaxUs: maxUS, Errors: errors}
	if hi > lo {
		h.Counts = append([]uint64(nil), counts[lo:hi]...)
	}
	return h
}

// Count is the number of samples in h (0 for nil).
func (h *LatencyHistogram) Count() uint64 {
	var n uint64
	for _, c := range h.GetCounts() {
		n += c
	}
	return n
}

// Merge adds o to h (h must not be nil; o may be).
func (h *LatencyHistogram) Merge(o *LatencyHistogram) {
	if o.Count() == 0 {
		h.Errors += o.GetErrors()
		return
	}
	var dense [LatencyBuckets]uint64
	for _, x := range []*LatencyHistogram{h, o} {
		for i, c := range x.GetCounts() {
			if j := int(x.GetFirst()) + i; j < LatencyBuckets {
				dense[j] += c
			}
		}
	}
	m := NewLatencyHistogram(dense[:], max(h.GetMaxUs(), o.GetMaxUs()), h.GetErrors()+o.GetErrors())
	h.First, h.Counts, h.MaxUs, h.Errors = m.First, m.Counts, m.MaxUs, m.Errors
}

// Quantile returns the q-quantile (0 < q <= 1) of h, interpolated within its bucket and never
// above the maximum; ok is false when h holds fewer than MinLatencySamples samples.
func (h *LatencyHistogram) Quantile(q float64) (d time.Duration, ok bool) {
	n := h.Count()
	if n < MinLatencySamples {
		return 0, false
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	var seen uint64
	for i, c := range h.GetCounts() {
		if c == 0 || seen+c < rank {
			seen += c
			continue
		}
		lo, hi := LatencyBucketBounds(int(h.GetFirst()) + i)
		us := float64(lo) + float64(hi-lo)*float64(rank-seen)/float64(c)
		if m := h.GetMaxUs(); m > 0 {
			us = min(us, float64(m))
		}
		return time.Duration(us * float64(time.Microsecond)), true
	}
	return time.Duration(h.GetMaxUs()) * time.Microsecond, true
}

// Max is the longest latency in h.
func (h *LatencyHistogram) Max() time.Duration {
	return time.Duration(h.GetMaxUs()) * time.Microsecond
}
