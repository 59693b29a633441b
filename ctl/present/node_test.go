package present

import (
	"slices"
	"testing"

	"ringkv/proto/kvpb"
)

func TestNodeWords(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{NodeState(kvpb.NodeState_NODE_STATE_UP), "UP"},
		{NodeState(kvpb.NodeState_NODE_STATE_DOWN), "DOWN"},
		{NodeState(kvpb.NodeState_NODE_STATE_JOINING), "JOINING"},
		{NodeState(kvpb.NodeState_NODE_STATE_LEAVING), "LEAVING"},
		{NodeState(kvpb.NodeState_NODE_STATE_REMOVED), "REMOVED"},
		{NodeState(kvpb.NodeState_NODE_STATE_UNSPECIFIED), "-"},
		{RaftRole(kvpb.RaftRole_RAFT_ROLE_LEADER), "leader"},
		{RaftRole(kvpb.RaftRole_RAFT_ROLE_NONE), "none"},
		{RaftRole(kvpb.RaftRole_RAFT_ROLE_UNSPECIFIED), "-"},
		{BreakerState(kvpb.BreakerState_OPEN), "open"},
		{BreakerState(kvpb.BreakerState_CLOSED), "closed"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestCompareIDs(t *testing.T) {
	want := []string{"n1", "n2", "n9", "n10", "n11", "n99", "n100", "ringkv-2", "ringkv-10", "ringkv-extra-0", "x"}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortFunc(got, CompareIDs)
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
