package present

import (
	"slices"
	"testing"

	"ringkv/proto/kvpb"
)

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		info *kvpb.NodeInfoResponse
		want string
	}{
		{&kvpb.NodeInfoResponse{}, ""},
		{&kvpb.NodeInfoResponse{DiskFull: "disk full: 1.0 MiB free of 16.0 MiB, reserve 4.0 MiB (--min-free-disk)"}, "DISK FULL: 1.0 MiB free of 16.0 MiB, reserve 4.0 MiB (--min-free-disk)"},
		{&kvpb.NodeInfoResponse{DataDamage: "MANIFEST missing", DamagedRanges: 12},
			"DATA DAMAGED: 12 ranges damaged, awaiting repair (MANIFEST missing)"},
		{&kvpb.NodeInfoResponse{DiskFull: "x", DataDamage: "no other replica"}, "DISK FULL: x; DATA DAMAGED (no other replica)"},
	} {
		if got := Faults(tc.info); got != tc.want {
			t.Errorf("Faults(%v): got %q, want %q", tc.info, got, tc.want)
		}
	}
}

// TestGray: the nodes' verdicts merge to one per gray node, the kind most nodes name, in the
// order an operator counts nodes.
func TestGray(t *testing.T) {
	g := func(node string, k kvpb.GrayNode_Kind) *kvpb.GrayNode {
		return &kvpb.GrayNode{Node: node, Kind: k, Detail: "d"}
	}
	nodes := []*kvpb.NodeStatus{
		{Id: "n1", Info: &kvpb.NodeInfoResponse{Gray: []*kvpb.GrayNode{g("n10", kvpb.GrayNode_LATENCY), g("n3", kvpb.GrayNode_LOSS)}}},
		{Id: "n2", Info: &kvpb.NodeInfoResponse{Gray: []*kvpb.GrayNode{g("n3", kvpb.GrayNode_LATENCY), g("n10", kvpb.GrayNode_LATENCY)}}},
		{Id: "n3", Info: &kvpb.NodeInfoResponse{Gray: []*kvpb.GrayNode{g("n3", kvpb.GrayNode_LATENCY)}}},
		{Id: "n4", Error: "unreachable"},
	}
	var got []string
	for _, x := range Gray(nodes) {
		got = append(got, kvpb.GrayLine(x))
	}
	want := []string{"gray: n3 slow links: d", "gray: n10 slow links: d"}
	if !slices.Equal(got, want) {
		t.Errorf("Gray = %q, want %q", got, want)
	}
	if len(Gray(nodes[3:])) != 0 {
		t.Errorf("Gray of a node without info is not empty")
	}
}
