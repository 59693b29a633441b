package kvpb

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestLatencyBucketsTile checks that the buckets cover every latency once, in order, each at
// most 25% wide above 4 µs.
func TestLatencyBucketsTile(t *testing.T) {
	var next uint64
	for i := range LatencyBuckets {
		lo, hi := LatencyBucketBounds(i)
		if lo != next || hi <= lo {
			t.Fatalf("bucket %d: got [%d, %d), want it to start at %d", i, lo, hi, next)
		}
		if lo >= LatencySubBuckets && float64(hi-lo)/float64(lo) > 0.25+1e-9 {
			t.Errorf("bucket %d: got [%d, %d), want at most 25%% wide", i, lo, hi)
		}
		for _, us := range []uint64{lo, hi - 1} {
			if got := LatencyBucket(us); got != i {
				t.Errorf("LatencyBucket(%d): got %d, want %d", us, got, i)
			}
		}
		next = hi
	}
	if got := LatencyBucket(math.MaxUint64); got != LatencyBuckets-1 {
		t.Errorf("LatencyBucket(max): got %d, want the last bucket %d", got, LatencyBuckets-1)
	}
}

// TestLatencyQuantile compares quantiles of a histogram with the exact ones of its samples,
// merged from two halves, and checks that too few samples give no quantile.
func TestLatencyQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var a, b [LatencyBuckets]uint64
	var samples []float64
	var maxUS uint64
	for i := range 20000 {
		us := uint64(200 + rng.ExpFloat64()*800)
		if i%100 == 0 {
			us = 50_000 + uint64(rng.IntN(10_000))
		}
		samples = append(samples, float64(us))
		maxUS = max(maxUS, us)
		if i%2 == 0 {
			a[LatencyBucket(us)]++
		} else {
			b[LatencyBucket(us)]++
		}
	}
	h := NewLatencyHistogram(a[:], 0, 3)
	h.Merge(NewLatencyHistogram(b[:], maxUS, 4))
	if h.Count() != 20000 || h.GetErrors() != 7 || h.GetMaxUs() != maxUS {
		t.Fatalf("merged: got count %d errors %d max %d, want 20000, 7, %d", h.Count(), h.GetErrors(), h.GetMaxUs(), maxUS)
	}
	slices.Sort(samples)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := samples[int(math.Ceil(q*float64(len(samples))))-1]
		d, ok := h.Quantile(q)
		got := float64(d) / float64(time.Microsecond)
		if !ok || math.Abs(got-want)/want > 0.25 {
			t.Errorf("q%v: got %.0f µs (ok %v), want %.0f ± 25%%", q, got, ok, want)
		}
	}
	var few [LatencyBuckets]uint64
	few[LatencyBucket(1000)] = MinLatencySamples - 1
	if d, ok := NewLatencyHistogram(few[:], 1000, 0).Quantile(0.99); ok {
		t.Errorf("p99 of %d samples: got %v, want none", MinLatencySamples-1, d)
	}
	var empty *LatencyHistogram
	if empty.Count() != 0 {
		t.Errorf("nil histogram: got count %d, want 0", empty.Count())
	}
}

// TestSlowForOthers: the node the others' calls find slow is named with the nodes that saw it;
// the slow node's own view, where every peer looks slow, names no one.
func TestSlowForOthers(t *testing.T) {
	h := func(n int, d time.Duration) *LatencyHistogram {
		var dense [LatencyBuckets]uint64
		dense[LatencyBucket(uint64(d.Microseconds()))] = uint64(n)
		return NewLatencyHistogram(dense[:], uint64(d.Microseconds()), 0)
	}
	fast, slow := 3*time.Millisecond, 60*time.Millisecond
	views := map[string][]*PeerLatency{
		"n1": {{Node: "n2", Calls_10S: h(100, fast)}, {Node: "n3", Calls_10S: h(100, slow)}},
		"n2": {{Node: "n1", Calls_10S: h(100, fast)}, {Node: "n3", Calls_10S: h(100, slow)}},
		// n3 is the slow one: its own calls take as long to every peer.
		"n3": {{Node: "n1", Calls_10S: h(100, slow)}, {Node: "n2", Calls_10S: h(100, slow)}},
	}
	got := SlowForOthers(views)
	if len(got) != 1 || got["n3"] == nil || got["n3"].GetCalls() != 200 || len(got["n3"].GetSeenBy()) != 2 {
		t.Fatalf("got %v, want n3 alone, seen by n1 and n2 in 200 calls", got)
	}
	if p := got["n3"].GetP90Ms(); p < 50 || p > 60 {
		t.Errorf("n3 p90: got %.1fms, want about 60ms", p)
	}
}

// TestStandsOutByTime: a replica stands out by the time it held calls past the floor when its
// p90 does not show it, and only for a tenth of the window or more and twice the others'.
func TestStandsOutByTime(t *testing.T) {
	h := func(n int, d, stalled time.Duration) *LatencyHistogram {
		var dense [LatencyBuckets]uint64
		dense[LatencyBucket(uint64(d.Microseconds()))] = uint64(n)
		x := NewLatencyHistogram(dense[:], uint64(d.Microseconds()), 0)
		x.StalledUs = uint64(stalled.Microseconds())
		return x
	}
	fast := time.Millisecond
	for _, tc := range []struct {
		name   string
		h      *LatencyHistogram
		others []*LatencyHistogram
		want   bool
	}{
		{"stopped half the time", h(1000, fast, 4*time.Second), []*LatencyHistogram{h(1000, fast, 0)}, true},
		{"a tenth of the window", h(1000, fast, ShortWindow/10), []*LatencyHistogram{h(1000, fast, 0)}, true},
		{"one stall of a busy machine", h(1000, fast, 100*time.Millisecond), []*LatencyHistogram{h(1000, fast, 0)}, false},
		{"the others held as long", h(1000, fast, 4*time.Second), []*LatencyHistogram{h(1000, fast, 3*time.Second)}, false},
		{"too few calls", h(MinLatencySamples-1, fast, 4*time.Second), []*LatencyHistogram{h(1000, fast, 0)}, false},
		{"no other to compare with", h(1000, fast, 4*time.Second), []*LatencyHistogram{h(MinLatencySamples-1, fast, 0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, got := StandsOut(tc.h, tc.others); got != tc.want {
				t.Errorf("got stands out %v, want %v", got, tc.want)
			}
		})
	}
	// Views of the same window merge to the largest stall, not the sum.
	m := h(10, fast, time.Second)
	m.Merge(h(10, fast, 3*time.Second))
	m.Merge(&LatencyHistogram{StalledUs: uint64((2 * time.Second).Microseconds())})
	if got := m.Stalled(); got != 3*time.Second {
		t.Errorf("merged stall: got %v, want 3s (the largest view)", got)
	}
	views := map[string][]*PeerLatency{
		"n1": {{Node: "n2", Calls_10S: h(1000, fast, 0)}, {Node: "n3", Calls_10S: h(1000, fast, 4*time.Second)}},
		"n2": {{Node: "n1", Calls_10S: h(1000, fast, 0)}, {Node: "n3", Calls_10S: h(1000, fast, 3*time.Second)}},
	}
	got := SlowForOthers(views)
	if len(got) != 1 || got["n3"].GetStalledShare() != 0.4 {
		t.Errorf("slow for others: got %v, want n3 with a stalled share of 0.4", got)
	}
}
