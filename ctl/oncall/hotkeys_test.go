package oncall

import (
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

// TestMergeHotKeysCoordinators: the nodes that coordinated an operation in the window are
// counted; a node no client sends to (one just added) is not.
func TestMergeHotKeysCoordinators(t *testing.T) {
	end := time.Unix(1_800_000_000, 0)
	rep := func(node string, ops uint64) *kvpb.HotKeysResponse {
		return &kvpb.HotKeysResponse{Node: node, StartUnixNanos: end.Add(-10 * time.Second).UnixNano(), EndUnixNanos: end.UnixNano(),
			Slices: 1, Ops: ops, Keys: []*kvpb.HotKey{{Key: []byte("demo:0"), KeyLen: 6, Token: 1, Count: ops / 8, Reads: ops / 8}}}
	}
	rs := &kvpb.RingState{Epoch: 2, Replicas: 3, Members: []*kvpb.Member{
		{Id: "n1", Tokens: []uint64{1 << 62}}, {Id: "n2", Tokens: []uint64{2 << 62}},
		{Id: "n3", Tokens: []uint64{3 << 62}}, {Id: "n4", Tokens: []uint64{1 << 61}},
	}}
	res, err := MergeHotKeys([]*kvpb.HotKeysResponse{rep("n1", 700), rep("n2", 650), rep("n3", 650), rep("n4", 0)}, rs, HotKeysQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Coordinators != 3 || len(res.Nodes) != 4 {
		t.Errorf("got %d coordinators of %d nodes, want 3 of 4", res.Coordinators, len(res.Nodes))
	}
}
