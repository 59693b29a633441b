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

// TestGray: one verdict per gray node, in the order an operator counts nodes: a node that
// answered speaks for itself (what its /readyz says), whatever the others name it; of one
// that did not, the kind most of the others name.
func TestGray(t *testing.T) {
	g := func(node string, k kvpb.GrayNode_Kind) *kvpb.GrayNode {
		return &kvpb.GrayNode{Node: node, Kind: k, Detail: "d"}
	}
	for _, tc := range []struct {
		name  string
		nodes []*kvpb.NodeStatus
		want  []string
	}{
		{"answered: its own verdict, against the others' majority", []*kvpb.NodeStatus{
			{Id: "n1", Info: &kvpb.NodeInfoResponse{Gray: []*kvpb.GrayNode{g("n3", kvpb.GrayNode_LOSS)}}},
			{Id: "n2", Info: &kvpb.NodeInfoResponse{Gray: []*kvpb.GrayNode{g("n3", kvpb.GrayNode_LOSS)}}},
			{Id: "n3", Info: &kvpb.NodeInfoResponse{Gray: []*kvpb.GrayNode{g("n3", kvpb.GrayNode_LATENCY)}}},
		}, []string{"gray: n3 slow links: d"}},
		{"answered and not gray by its own verdict: not named", []*kvpb.NodeStatus{
			{Id: "n1", Info: &kvpb.NodeInfoResponse{Gray: []*kvpb.GrayNode{g("n3", kvpb.GrayNode_LOSS)}}},
			{Id: "n2", Info: &kvpb.NodeInfoResponse{Gray: []*kvpb.GrayNode{g("n3", kvpb.GrayNode_LOSS)}}},
			{Id: "n3", Info: &kvpb.NodeInfoResponse{}},
		}, nil},
		{"not answered: the kind most others name", []*kvpb.NodeStatus{
			{Id: "n1", Info: &kvpb.NodeInfoResponse{Gray: []*kvpb.GrayNode{g("n10", kvpb.GrayNode_LATENCY), g("n3", kvpb.GrayNode_FLAPPING)}}},
			{Id: "n2", Info: &kvpb.NodeInfoResponse{Gray: []*kvpb.GrayNode{g("n3", kvpb.GrayNode_LOSS), g("n10", kvpb.GrayNode_LATENCY)}}},
			{Id: "n4", Info: &kvpb.NodeInfoResponse{Gray: []*kvpb.GrayNode{g("n3", kvpb.GrayNode_LOSS)}}},
			{Id: "n3", Error: "unreachable"},
		}, []string{"gray: n3 lossy: d", "gray: n10 slow links: d"}},
		{"nobody answered", []*kvpb.NodeStatus{{Id: "n4", Error: "unreachable"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, x := range Gray(tc.nodes) {
				got = append(got, kvpb.GrayLine(x))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Gray = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRestarts: a node its peers saw come back within the minute is noted, by the latest
// comeback, as restarted when its uptime is that short; not when it is named gray, nor when
// it does not answer.
func TestRestarts(t *testing.T) {
	link := func(peer string, ago, away uint64) *kvpb.LinkStats {
		return &kvpb.LinkStats{Peer: peer, BackAgoMillis: ago, AwayMillis: away}
	}
	nodes := []*kvpb.NodeStatus{
		{Id: "n1", Info: &kvpb.NodeInfoResponse{UptimeSeconds: 600, Links: []*kvpb.LinkStats{link("n1", 0, 0), link("n3", 5200, 5000)}}},
		{Id: "n2", Info: &kvpb.NodeInfoResponse{UptimeSeconds: 600, Links: []*kvpb.LinkStats{link("n3", 4800, 5100), link("n4", 3000, 2000)}}},
		{Id: "n3", Info: &kvpb.NodeInfoResponse{UptimeSeconds: 5}},
		{Id: "n4", Info: &kvpb.NodeInfoResponse{UptimeSeconds: 600}},
		{Id: "n5", Error: "connection refused"},
	}
	var got []string
	for _, r := range Restarts(nodes, nil) {
		got = append(got, r.Line())
	}
	want := []string{
		"note: n3 restarted 5s ago after 5.1s away (flapping if it goes again within a minute)",
		"note: n4 came back 3s ago after 2s away (flapping if it goes again within a minute)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Restarts = %q, want %q", got, want)
	}
	if r := Restarts(nodes, []*kvpb.GrayNode{{Node: "n3"}, {Node: "n4"}}); len(r) != 0 {
		t.Errorf("Restarts of gray nodes = %v, want none", r)
	}
}
