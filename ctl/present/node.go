package present

import (
	"cmp"
	"strings"

	"ringkv/proto/kvpb"
)

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

// CompareIDs orders node ids as an operator counts them: runs of digits by their value, so
// n2 comes before n10 (and ringkv-9 before ringkv-10); otherwise byte by byte.
func CompareIDs(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Compare(len(na), len(nb)); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digits is the length of the run of ASCII digits that s begins with.
func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
