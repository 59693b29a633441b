package present

import "ringkv/proto/kvpb"

// The words every surface shows for a node's state, its raft role, a circuit breaker's state,
// an operation and the role a node plays in it. A value an older node did not report reads
// "-".
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
		kvpb.RaftRole_RAFT_ROLE_FOLLOWER:  "follower",
		kvpb.RaftRole_RAFT_ROLE_CANDIDATE: "candidate",
		kvpb.RaftRole_RAFT_ROLE_NONVOTER:  "nonvoter",
	}
	breakerWords = map[kvpb.BreakerState_State]string{
		kvpb.BreakerState_CLOSED: "closed",
		kvpb.BreakerState_OPEN:   "open",
	}
	opWords = map[kvpb.Op]string{
		kvpb.Op_OP_GET:    "get",
		kvpb.Op_OP_PUT:    "put",
		kvpb.Op_OP_DELETE: "delete",
	}
	opRoleWords = map[kvpb.OpRole]string{
		kvpb.OpRole_OP_ROLE_COORDINATOR: "coordinator",
		kvpb.OpRole_OP_ROLE_REPLICA:     "replica",
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

// RaftRole renders a node's raft role: "leader", "follower", "candidate", "nonvoter", "none".
func RaftRole(r kvpb.RaftRole) string { return word(raftWords, r) }

// BreakerState renders a circuit breaker's state: "closed", "open".
func BreakerState(s kvpb.BreakerState_State) string { return word(breakerWords, s) }

// Op renders a client operation: "get", "put", "delete".
func Op(o kvpb.Op) string { return word(opWords, o) }

// OpRole renders the role a node plays in an operation: "coordinator", "replica".
func OpRole(r kvpb.OpRole) string { return word(opRoleWords, r) }
