package latency

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ringkv/internal/testclock"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

func testRing(t testing.TB, replicas, vnodes int, ids ...string) *ring.Ring {
	t.Helper()
	toks := ring.FounderTokens(ids, vnodes)
	var ms []ring.Member
	for _, id := range ids {
		ms = append(ms, ring.Member{ID: id, Addr: id + ":1", State: ring.StateUp, Tokens: toks[id]})
	}
	r, err := ring.New(1, replicas, ms)
	if err != nil {
		t.Fatalf("ring.New: %v", err)
	}
	return r
}

// start is the beginning of a slice.
var start = time.Unix(1_700_000_000, 0).Truncate(SliceLen)

func newTracker(t testing.TB, rg *ring.Ring) (*Tracker, *testclock.Clock) {
	var box atomic.Pointer[ring.Ring]
	box.Store(rg)
	clk := testclock.New(start)
	return New(Config{Ring: box.Load, Now: clk.Now}), clk
}

func vnodeOf(resp *kvpb.VnodesResponse, token uint64) *kvpb.VnodeLatency {
	for _, v := range resp.GetVnodes() {
		if v.GetToken() == token {
			return v
		}
	}
	return nil
}

// TestWindows checks that operations count in the short window for two complete slices, in
// the long one for twelve, and in neither while their slice is in progress; and that vnodes
// without operations are neither allocated nor listed.
func TestWindows(t *testing.T) {
	rg := testRing(t, 3, 8, "n1", "n2", "n3")
	tr, clk := newTracker(t, rg)
	v := rg.Ranges()[3]
	for i := range 100 {
		tr.ObserveOp(v.End, false, time.Duration(i+1)*time.Millisecond, i%10 == 0)
		tr.ObserveOp(v.End, true, 2*time.Millisecond, false)
	}
	if n := len(tr.Snapshot("n1").GetVnodes()); n != 0 {
		t.Fatalf("during the slice: got %d vnodes, want none (the slice is not complete)", n)
	}
	allocated := 0
	for i := range tr.vt.Load().v {
		if tr.vt.Load().v[i].Load() != nil {
			allocated++
		}
	}
	if allocated != 1 {
		t.Errorf("got %d vnodes allocated, want 1 (only the one with traffic)", allocated)
	}
	for _, tc := range []struct {
		after       time.Duration
		short, long uint64
	}{
		{SliceLen, 100, 100},
		{ShortSlices * SliceLen, 100, 100},
		{(ShortSlices + 1) * SliceLen, 0, 100},
		{LongSlices * SliceLen, 0, 100},
		{(LongSlices + 1) * SliceLen, 0, 0},
	} {
		clk.Set(start.Add(tc.after))
		resp := tr.Snapshot("n1")
		vl := vnodeOf(resp, v.End)
		if tc.long == 0 {
			if vl != nil {
				t.Errorf("after %v: got vnode %d listed, want it gone", tc.after, v.End)
			}
			continue
		}
		if vl == nil {
			t.Fatalf("after %v: vnode %d missing", tc.after, v.End)
		}
		if got := vl.GetReads_10S().Count(); got != tc.short {
			t.Errorf("after %v: got %d reads in 10 s, want %d", tc.after, got, tc.short)
		}
		if got := vl.GetReads_1M().Count(); got != tc.long {
			t.Errorf("after %v: got %d reads in 1 m, want %d", tc.after, got, tc.long)
		}
		if got := vl.GetReads_1M().GetErrors(); got != 10 {
			t.Errorf("after %v: got %d read errors, want 10", tc.after, got)
		}
		if p99, ok := vl.GetReads_1M().Quantile(0.99); !ok || p99 < 90*time.Millisecond || p99 > 100*time.Millisecond {
			t.Errorf("after %v: got read p99 %v (ok %v), want 99ms within its bucket", tc.after, p99, ok)
		}
		if got := vl.GetReads_1M().Max(); got != 100*time.Millisecond {
			t.Errorf("after %v: got read max %v, want 100ms", tc.after, got)
		}
		if got := vl.GetWrites_1M().Count(); got != 100 {
			t.Errorf("after %v: got %d writes, want 100", tc.after, got)
		}
	}
	// A slot reused a minute later starts empty.
	tr.ObserveOp(v.End, false, time.Millisecond, false)
	clk.Advance(SliceLen)
	if got := vnodeOf(tr.Snapshot("n1"), v.End).GetReads_1M().Count(); got != 1 {
		t.Errorf("a minute later: got %d reads, want 1 (the old slice's counts dropped)", got)
	}
}

// TestPeers checks what is recorded of each peer: calls per vnode and overall, timeouts,
// hedges and breaker trips.
func TestPeers(t *testing.T) {
	rg := testRing(t, 3, 8, "n1", "n2", "n3")
	tr, clk := newTracker(t, rg)
	v := rg.Ranges()[0]
	for range 60 {
		tr.ObserveCall("n2", v.End, true, time.Millisecond, nil)
		tr.ObserveCall("n3", v.End, false, 40*time.Millisecond, nil)
	}
	tr.ObserveCall("n3", v.End, false, time.Second, fmt.Errorf("replica n3: %w", context.DeadlineExceeded))
	tr.ObserveHedge("n3")
	tr.ObserveHedge("n3")
	tr.ObserveBreakerTrip("n3")
	clk.Advance(SliceLen)
	resp := tr.Snapshot("n1")
	if len(resp.GetPeers()) != 2 {
		t.Fatalf("got %d peers, want 2: %v", len(resp.GetPeers()), resp.GetPeers())
	}
	n3 := resp.GetPeers()[1]
	if n3.GetNode() != "n3" || n3.GetCalls_10S().Count() != 61 || n3.GetCalls_10S().GetErrors() != 1 ||
		n3.GetTimeouts_10S() != 1 || n3.GetHedges_10S() != 2 || n3.GetBreakerTrips_10S() != 1 || n3.GetHedges_1M() != 2 {
		t.Errorf("n3: got %v, want 61 calls, 1 error, 1 timeout, 2 hedges, 1 trip", n3)
	}
	vl := vnodeOf(resp, v.End)
	if vl != nil {
		t.Errorf("vnode without client operations: got it listed, want it absent")
	}
	tr.ObserveOp(v.End, false, time.Millisecond, false)
	clk.Advance(SliceLen)
	vl = vnodeOf(tr.Snapshot("n1"), v.End)
	if vl == nil || len(vl.GetReplicas()) != 2 || vl.GetReplicas()[0].GetNode() != "n2" || vl.GetReplicas()[1].GetCalls_10S().Count() != 61 {
		t.Errorf("vnode replicas: got %v, want n2 and n3 with 61 calls", vl)
	}
}

// TestRingChange checks that a vnode's latency follows its end token to the next ring.
func TestRingChange(t *testing.T) {
	rg := testRing(t, 3, 8, "n1", "n2", "n3")
	var box atomic.Pointer[ring.Ring]
	box.Store(rg)
	clk := testclock.New(start)
	tr := New(Config{Ring: box.Load, Now: clk.Now})
	end := rg.Ranges()[2].End
	tr.ObserveOp(end, true, time.Millisecond, false)
	box.Store(testRing(t, 3, 8, "n1", "n2", "n3")) // a new ring value, same tokens
	tr.ObserveOp(end, true, time.Millisecond, false)
	clk.Advance(SliceLen)
	if got := vnodeOf(tr.Snapshot("n1"), end).GetWrites_10S().Count(); got != 2 {
		t.Errorf("got %d writes across the ring change, want 2", got)
	}
}

// TestConcurrent records from several goroutines across slice turnovers (run with -race):
// every observation of a complete slice is counted.
func TestConcurrent(t *testing.T) {
	rg := testRing(t, 3, 16, "n1", "n2", "n3")
	tr, clk := newTracker(t, rg)
	ranges := rg.Ranges()
	const workers, per = 4, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				tok := ranges[(w+i)%len(ranges)].End
				tr.ObserveOp(tok, i%2 == 0, time.Duration(i)*time.Microsecond, false)
				tr.ObserveCall("n2", tok, true, time.Millisecond, nil)
			}
		})
	}
	wg.Wait()
	clk.Advance(SliceLen)
	var total uint64
	for _, v := range tr.Snapshot("n1").GetVnodes() {
		total += v.GetReads_10S().Count() + v.GetWrites_10S().Count()
	}
	if total != workers*per {
		t.Errorf("got %d operations, want %d", total, workers*per)
	}
}

// TestMemoryBound pins the documented size of a vnode's and a peer's latency (docs/bench.md).
func TestMemoryBound(t *testing.T) {
	if got := VnodeBytes(2); got > 14<<10 {
		t.Errorf("VnodeBytes(2 peers): got %d, want at most 14 KiB", got)
	}
	if got := PeerBytes(); got > 6<<10 {
		t.Errorf("PeerBytes: got %d, want at most 6 KiB", got)
	}
	t.Logf("vnode with 2 peer replicas: %d B; peer: %d B", VnodeBytes(2), PeerBytes())
}

func BenchmarkObserveOp(b *testing.B) {
	rg := testRing(b, 3, 64, "n1", "n2", "n3")
	var box atomic.Pointer[ring.Ring]
	box.Store(rg)
	tr := New(Config{Ring: box.Load})
	ranges := rg.Ranges()
	b.ResetTimer()
	for i := range b.N {
		tr.ObserveOp(ranges[i%len(ranges)].End, i%2 == 0, time.Duration(i%5000)*time.Microsecond, false)
	}
}

func BenchmarkObserveCall(b *testing.B) {
	rg := testRing(b, 3, 64, "n1", "n2", "n3")
	var box atomic.Pointer[ring.Ring]
	box.Store(rg)
	tr := New(Config{Ring: box.Load})
	ranges := rg.Ranges()
	b.ResetTimer()
	for i := range b.N {
		tr.ObserveCall("n2", ranges[i%len(ranges)].End, true, time.Duration(i%5000)*time.Microsecond, nil)
	}
}

func BenchmarkObserveOpParallel(b *testing.B) {
	rg := testRing(b, 3, 64, "n1", "n2", "n3")
	var box atomic.Pointer[ring.Ring]
	box.Store(rg)
	tr := New(Config{Ring: box.Load})
	ranges := rg.Ranges()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			tr.ObserveOp(ranges[i%len(ranges)].End, i%2 == 0, time.Duration(i%5000)*time.Microsecond, false)
			i++
		}
	})
}

// TestStalledTime: a replica stopped 50 ms of every 100 ms, called by one closed-loop client
// (its next call when the last is answered) and a replica that answers at once, called as
// often. The closed loop sends one call into each stop and some 90 while the replica runs, so
// the stopped replica is slow on fewer than a tenth of its calls and its p90 does not show it;
// the time it held calls does (about 40% of the window: 40 ms past the floor of every stop),
// and it stands out by it. Calls that wait out the same stop count once, in whatever order
// they are timed.
func TestStalledTime(t *testing.T) {
	if ShortSlices*SliceLen != kvpb.ShortWindow {
		t.Fatalf("short window: got %v, want kvpb.ShortWindow %v", ShortSlices*SliceLen, kvpb.ShortWindow)
	}
	rg := testRing(t, 3, 8, "n1", "n2", "n3")
	tr, clk := newTracker(t, rg)
	v := rg.Ranges()[0]
	const quick = 500 * time.Microsecond
	now := start
	for now.Before(start.Add(ShortSlices * SliceLen)) {
		d := quick
		if into := now.Sub(start) % (100 * time.Millisecond); into < 50*time.Millisecond {
			d = 50*time.Millisecond - into + quick // stopped: answered once it runs again
		}
		now = now.Add(d)
		clk.Set(now)
		if d > quick {
			// Another coordinator's call sent during the same stop, answered with the
			// closed loop's and timed first.
			tr.ObserveCall("n3", v.End, false, d/2, nil)
		}
		tr.ObserveCall("n3", v.End, false, d, nil)
		tr.ObserveCall("n2", v.End, false, quick, nil)
		tr.ObserveOp(v.End, true, d, false)
	}
	clk.Set(start.Add(ShortSlices * SliceLen))
	resp := tr.Snapshot("n1")
	vl := vnodeOf(resp, v.End)
	if vl == nil || len(vl.GetReplicas()) != 2 || len(resp.GetPeers()) != 2 {
		t.Fatalf("got vnode %v and peers %v, want both replicas", vl, resp.GetPeers())
	}
	n2, n3 := vl.GetReplicas()[0].GetCalls_10S(), vl.GetReplicas()[1].GetCalls_10S()
	if p90, _ := n3.Quantile(kvpb.SlowQuantile); p90 > kvpb.SlowFloor {
		t.Errorf("n3 p90: got %v, want below the floor (the closed loop's quick calls hide the stops)", p90)
	}
	for _, tc := range []struct {
		name  string
		h     *kvpb.LatencyHistogram
		share float64
	}{
		{"n3 in the vnode", n3, 0.4},
		{"n3 over all vnodes", resp.GetPeers()[1].GetCalls_10S(), 0.4},
		{"n2", n2, 0},
	} {
		if got := tc.h.StalledShare(); got < tc.share-0.01 || got > tc.share+0.01 {
			t.Errorf("%s: got stalled share %.3f, want %.2f", tc.name, got, tc.share)
		}
	}
	if _, _, ok := kvpb.StandsOut(n3, []*kvpb.LatencyHistogram{n2}); !ok {
		t.Errorf("n3: does not stand out, want it to by the time it held calls")
	}
	if _, _, ok := kvpb.StandsOut(n2, []*kvpb.LatencyHistogram{n3}); ok {
		t.Errorf("n2: stands out, want not")
	}
}
