package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"ringkv/internal/eventually"
	"ringkv/proto/kvpb"
)

// roles maps each running node to its raft role.
func roles(nodes []*testNode) map[string]kvpb.RaftRole {
	out := map[string]kvpb.RaftRole{}
	for _, n := range nodes {
		if n.c != nil {
			out[n.id] = n.c.Role()
		}
	}
	return out
}

func countRoles(r map[string]kvpb.RaftRole, want ...kvpb.RaftRole) int {
	n := 0
	for _, role := range r {
		if slices.Contains(want, role) {
			n++
		}
	}
	return n
}

// Six founders: five vote, the sixth starts as a non-voter (raft's live bootstrap refuses a
// node that would not vote); when a voter dies, the leader hands its vote to the non-voter.
func TestSixFoundersAndDeadVoter(t *testing.T) {
	nodes := startFounders(t, 6)
	eventually.Succeeds(t, 10*time.Second, func() error {
		r := roles(nodes)
		if countRoles(r, kvpb.RaftRole_RAFT_ROLE_LEADER) != 1 || countRoles(r, kvpb.RaftRole_RAFT_ROLE_LEADER, kvpb.RaftRole_RAFT_ROLE_FOLLOWER) != 5 || r["n6"] != kvpb.RaftRole_RAFT_ROLE_NONVOTER {
			return fmt.Errorf("got roles %v, want one leader, five voters, n6 non-voter", r)
		}
		return nil
	})
	leader, _ := leaderOf(t, nodes)
	var victim *testNode
	for _, n := range nodes {
		if n != leader && n.id != "n6" {
			victim = n
			break
		}
	}
	victim.stop()
	eventually.Succeeds(t, 15*time.Second, func() error {
		r := roles(nodes)
		if r["n6"] != kvpb.RaftRole_RAFT_ROLE_FOLLOWER && r["n6"] != kvpb.RaftRole_RAFT_ROLE_LEADER {
			return fmt.Errorf("after %s died: got roles %v, want n6 voting", victim.id, r)
		}
		if got := countRoles(r, kvpb.RaftRole_RAFT_ROLE_LEADER, kvpb.RaftRole_RAFT_ROLE_FOLLOWER); got != 5 {
			return fmt.Errorf("after %s died: got %d live voters (%v), want 5", victim.id, got, r)
		}
		return nil
	})
	// The dead voter was demoted: it comes back as a non-voter.
	victim = victim.restart()
	nodes = append(nodes, victim)
	eventually.Succeeds(t, 15*time.Second, func() error {
		if got := victim.c.Role(); got != kvpb.RaftRole_RAFT_ROLE_NONVOTER {
			return fmt.Errorf("%s back: got role %s, want a non-voter", victim.id, got)
		}
		return nil
	})
}
