package oncall

import (
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

// hist is n samples at d.
func hist(n int, d time.Duration) *kvpb.LatencyHistogram {
	var dense [kvpb.LatencyBuckets]uint64
	dense[kvpb.LatencyBucket(uint64(d.Microseconds()))] = uint64(n)
	return kvpb.NewLatencyHistogram(dense[:], uint64(d.Microseconds()), 0)
}

// TestSlowestReplica: a replica whose calls are 25× slower than the vnode's other replica's is
// named; none is when they are alike, when the slow one is under the floor, or when it has
// too few calls; with no other replica to compare with, the other nodes' calls are the
// reference.
func TestSlowestReplica(t *testing.T) {
	rs := &kvpb.RingState{Replicas: 2, Members: []*kvpb.Member{
		{Id: "n1", Tokens: []uint64{100, 400}}, {Id: "n2", Tokens: []uint64{200, 500}}, {Id: "n3", Tokens: []uint64{300, 600}},
	}}
	vl := func(token uint64, reps map[string]*kvpb.LatencyHistogram) *kvpb.VnodeLatency {
		v := &kvpb.VnodeLatency{Token: token, Writes_10S: hist(100, 2*time.Millisecond)}
		for _, id := range []string{"n1", "n2", "n3"} {
			if h, ok := reps[id]; ok {
				v.Replicas = append(v.Replicas, &kvpb.ReplicaLatency{Node: id, Calls_10S: h})
			}
		}
		return v
	}
	fast, slow := 2*time.Millisecond, 50*time.Millisecond
	rep := &kvpb.VnodesResponse{Node: "n1", WindowSeconds: 10, Vnodes: []*kvpb.VnodeLatency{
		vl(200, map[string]*kvpb.LatencyHistogram{"n2": hist(100, fast), "n3": hist(100, slow)}),               // n3 stands out
		vl(300, map[string]*kvpb.LatencyHistogram{"n2": hist(100, fast), "n3": hist(100, 3*fast)}),             // alike enough
		vl(400, map[string]*kvpb.LatencyHistogram{"n2": hist(100, fast), "n3": hist(100, 8*time.Millisecond)}), // under the floor
		vl(500, map[string]*kvpb.LatencyHistogram{"n2": hist(100, fast), "n3": hist(20, slow)}),                // too few calls
		vl(600, map[string]*kvpb.LatencyHistogram{"n3": hist(100, slow)}),                                      // alone: vs the other nodes
	}, Peers: []*kvpb.PeerLatency{{Node: "n2", Calls_10S: hist(500, fast)}, {Node: "n3", Calls_10S: hist(400, slow)}}}
	res := MergeVnodes([]*kvpb.VnodesResponse{rep}, nil, rs)
	want := map[string]string{"100": "", "200": "n3", "300": "", "400": "", "500": "", "600": "n3"}
	for _, v := range res.Vnodes {
		if got := v.SlowestReplica; got != want[v.Vnode] {
			t.Errorf("vnode %s: got slowest %q, want %q", v.Vnode, got, want[v.Vnode])
		}
	}
	SortP99.Sort(res.Vnodes)
	if res.Vnodes[len(res.Vnodes)-1].Vnode != "100" {
		t.Errorf("--sort p99: got %s last, want 100 (no samples)", res.Vnodes[len(res.Vnodes)-1].Vnode)
	}
}
