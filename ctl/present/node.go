package present

import "ringkv/proto/kvpb"

// The words every surface shows for a node's state, its raft role and a circuit breaker's
// state. A value an older node did not report reads "-".
var (
	nodeWords = map[kvpb.NodeState]string{
		kvpb.NodeState_NODE_STATE_UP:      "UP",
		kvpb.NodeState_NODE_STATE_DOWN:    "DOWN",
		kvpb.NodeState_NODE_STATE_JOINING: "JOINING",
		kvpb.NodeState_NODE_STATE_LEAVING: "LEAVING",
		kvpb.NodeState_NODE_STATE_REMOVED: "REMOVED",
	}
	raftWords = map[kvpb.RaftRole]string{
		kvpb.RaftRole_RAFT_ROLE_NONE:      "none",
		kvpb.RaftRole_RAFT_ROLE_LEADER:    "leader",
		kvpb.RaftRole_RAFT_ROLE_FOLLOWER:  "voter",
		kvpb.RaftRole_RAFT_ROLE_CANDIDATE: "candidate",
		kvpb.RaftRole_RAFT_ROLE_NONVOTER:  "non-voter",
	}
	breakerWords = map[kvpb.BreakerState_State]string{
		kvpb.BreakerState_CLOSED: "closed",
		kvpb.BreakerState_OPEN:   "open",
	}
)

func word[E comparable](words map[E]string, e E) string {
	if w, ok := words[e]; ok {
		return w
	}
	return "-"
}

// NodeState renders a node's state: "UP", "DOWN", "JOINING", "LEAVING", "REMOVED" (in a
// plan's ownership after the change).
func NodeState(s kvpb.NodeState) string { return word(nodeWords, s) }

// RaftRole renders a node's raft role: "leader", "voter" (a follower), "candidate",
// "non-voter", "none".
func RaftRole(r kvpb.RaftRole) string { return word(raftWords, r) }

// BreakerState renders a circuit breaker's state: "closed", "open".
func BreakerState(s kvpb.BreakerState_State) string { return word(breakerWords, s) }
