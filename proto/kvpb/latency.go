package kvpb

import (
	"math"
	"math/bits"
	"slices"
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
	h.StalledUs = max(h.StalledUs, o.GetStalledUs())
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

// Stalled is how long, within the window, some call in h had been waiting past SlowFloor
// (the largest of the merged views).
func (h *LatencyHistogram) Stalled() time.Duration {
	return time.Duration(h.GetStalledUs()) * time.Microsecond
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

// When a replica stands out as slow (kvctl vnodes' slowest_replica, kvctl status's note):
// the SlowQuantile of its calls over the short window, from at least MinLatencySamples calls,
// is above SlowFloor and above SlowRatio times the median of the same quantile of the other
// replicas it is compared with (each from at least MinLatencySamples calls too). The p90, not
// the p99: on a busy machine any process stalls now and then, and from a few hundred calls a
// p99 is two or three of them; a tenth of the calls slow is a replica that is slow, not a
// scheduler's hiccup. A replica slow on fewer than a tenth of its calls is not named (kvctl
// vnodes still shows each replica's p99). The floor keeps a quiet cluster's sub-millisecond
// noise from naming anyone; the median keeps one other slow replica from hiding a third.
//
// A share of calls counts calls, and the clients decide how many there are: a closed-loop
// client (the next request when the last is answered) sends one call to a stalled replica and
// waits, then many quick ones while it runs, so a replica stopped half the time can be slow
// on fewer than a tenth of its calls. The replica also stands out, then, on time: when some
// call to it had been waiting past SlowFloor for at least StallShare of ShortWindow
// (LatencyHistogram.stalled_us), and SlowRatio times as long as the median of the others.
// One stall of a busy machine is a few tens of milliseconds of the window, far below it.
const (
	SlowQuantile = 0.9
	SlowRatio    = 2.0
	SlowFloor    = 10 * time.Millisecond
	StallShare   = 0.1
)

// ShortWindow is the window of the short-window (_10s) histograms.
const ShortWindow = 10 * time.Second

// StalledShare is the share of ShortWindow in which some call in h had been waiting past
// SlowFloor, at most 1.
func (h *LatencyHistogram) StalledShare() float64 {
	return min(float64(h.Stalled())/float64(ShortWindow), 1)
}

// StandsOut compares the calls h to one replica with the calls others to other replicas: q is
// h's SlowQuantile, ref the median of the others'; ok when h stands out by its quantile or by
// the time it held calls (see SlowRatio and StallShare). ok is false, and ref 0, when h or
// every other has too few samples.
func StandsOut(h *LatencyHistogram, others []*LatencyHistogram) (q, ref time.Duration, ok bool) {
	q, enough := h.Quantile(SlowQuantile)
	if !enough {
		return 0, 0, false
	}
	var ps []time.Duration
	var stalls []float64
	for _, o := range others {
		if p, ok := o.Quantile(SlowQuantile); ok {
			ps = append(ps, p)
			stalls = append(stalls, o.StalledShare())
		}
	}
	if len(ps) == 0 {
		return q, 0, false
	}
	ref = median(ps)
	byQuantile := q > SlowFloor && float64(q) > SlowRatio*float64(ref)
	share := h.StalledShare()
	byTime := share >= StallShare && share > SlowRatio*median(stalls)
	return q, ref, byQuantile || byTime
}

func median[T time.Duration | float64](xs []T) T {
	slices.Sort(xs)
	if len(xs)%2 == 0 {
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return xs[len(xs)/2]
}

// SlowForOthers finds the nodes whose calls stand out as slow for the other nodes: views holds
// each node's view of its peers (NodeInfoResponse.peer_latency, by the node that saw them). A
// node stands out in one view when its calls stand out against the view's other peers; it is
// slow for others when it does in more than half of the views with enough calls to it. Each
// view is judged on its own because a slow coordinator finds every peer slow alike: its view
// names no one, and it does not drag the others' reference up.
func SlowForOthers(views map[string][]*PeerLatency) map[string]*SlowReplica {
	type tally struct {
		judged int
		by     []string
		h      LatencyHistogram
		refs   []time.Duration
	}
	tallies := map[string]*tally{}
	for by, peers := range views {
		for _, p := range peers {
			var others []*LatencyHistogram
			for _, o := range peers {
				if o.GetNode() != p.GetNode() {
					others = append(others, o.GetCalls_10S())
				}
			}
			_, ref, ok := StandsOut(p.GetCalls_10S(), others)
			if ref == 0 {
				continue // too few calls to it, or to every other peer: no judgement
			}
			t := tallies[p.GetNode()]
			if t == nil {
				t = &tally{}
				tallies[p.GetNode()] = t
			}
			t.judged++
			if ok {
				t.by = append(t.by, by)
				t.h.Merge(p.GetCalls_10S())
				t.refs = append(t.refs, ref)
			}
		}
	}
	out := map[string]*SlowReplica{}
	for id, t := range tallies {
		if len(t.by) == 0 || 2*len(t.by) <= t.judged {
			continue
		}
		q, _ := t.h.Quantile(SlowQuantile)
		slices.Sort(t.by)
		slices.Sort(t.refs)
		out[id] = &SlowReplica{P90Ms: ms(q), OthersP90Ms: ms(t.refs[len(t.refs)/2]), Calls: t.h.Count(), SeenBy: t.by,
			StalledShare: t.h.StalledShare()}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
