package test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"ringkv/proto/kvpb"
)

// statusOf runs kvctl status -o json through p and decodes it.
func (c *tcluster) statusOf(p *proc) *kvpb.StatusResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := c.kvctl(ctx, p, "status", "-o", "json")
	st := &kvpb.StatusResponse{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(r.stdout), st); err != nil {
		c.t.Fatalf("decode kvctl status (exit %d) %q: %v\nstderr:\n%s", r.code, r.stdout, err, r.stderr)
	}
	return st
}

// waitAllUp waits until kvctl status through p lists exactly ids, every one UP, with one raft
// leader and voters voting members in all (the metadata group's odd number).
func (c *tcluster) waitAllUp(p *proc, ids []string, voters int) {
	c.t.Helper()
	waitFor(c.t, 60*time.Second, fmt.Sprintf("%d nodes UP, %d voting", len(ids), voters), func() error {
		st := c.statusOf(p)
		roles := map[kvpb.RaftRole]int{}
		var got []string
		for _, n := range st.GetNodes() {
			got = append(got, n.GetId())
			if n.GetState() != kvpb.NodeState_NODE_STATE_UP {
				return fmt.Errorf("%s is %s", n.GetId(), n.GetState())
			}
			roles[n.GetInfo().GetRaftRole()]++
		}
		if fmt.Sprint(got) != fmt.Sprint(ids) {
			return fmt.Errorf("got nodes %v, want %v", got, ids)
		}
		leaders, followers, nonvoters := roles[kvpb.RaftRole_RAFT_ROLE_LEADER], roles[kvpb.RaftRole_RAFT_ROLE_FOLLOWER], roles[kvpb.RaftRole_RAFT_ROLE_NONVOTER]
		if leaders != 1 || leaders+followers != voters || nonvoters != len(ids)-voters {
			return fmt.Errorf("got raft roles %v, want 1 leader, %d voting, %d non-voters", roles, voters, len(ids)-voters)
		}
		return nil
	})
}

func nodeIDs(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("n%d", i+1))
	}
	return out
}

// TestFoundersOfAnyCount: more founders than raft voters found a cluster that serves — the
// first five by id vote, the others join as non-voters — and a cluster grows the same way.
func TestFoundersOfAnyCount(t *testing.T) {
	t.Parallel()
	t.Run("9 founders", func(t *testing.T) {
		c := startCluster(t, 9, 0)
		c.waitAllUp(c.nodes[0], nodeIDs(9), 5)
	})
	t.Run("6 founders grown to 9", func(t *testing.T) {
		c := startCluster(t, 6, 3)
		c.waitAllUp(c.nodes[5], nodeIDs(6), 5)
		c.load(c.nodes[:6], 600, 64, 8)
		for _, p := range c.nodes[6:] {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			r := c.kvctl(ctx, c.nodes[0], "ring", "add", p.id+"="+p.grpc, "--yes", "-o", "json")
			cancel()
			if got := progressOf(t, r).GetState(); r.code != 0 || got != kvpb.ChangeState_CHANGE_STATE_DONE {
				t.Fatalf("ring add %s: got exit %d, state %v\nstderr:\n%s", p.id, r.code, got, r.stderr)
			}
		}
		c.waitAllUp(c.nodes[8], nodeIDs(9), 5)
	})
}

// TestRemoveDeadNodes: of seven founders two die; under a constant-rate writer both are removed
// one after the other while they stay down. The plan names the ranges that no live replica
// holds (while a third node does not answer) and refuses; the removal of the first needs
// --force (the second dead node would receive ranges), that of the second does not. Every
// acknowledged write is served at quorum afterwards.
func TestRemoveDeadNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 7, 0)
	c.waitAllUp(c.nodes[0], nodeIDs(7), 5)
	n1, n4, n5, n6 := c.node("n1"), c.node("n4"), c.node("n5"), c.node("n6")
	live := []*proc{c.node("n1"), c.node("n2"), c.node("n3"), n6, c.node("n7")}
	c.load(live, 2000, 64, 8)

	record := filepath.Join(t.TempDir(), "acked.jsonl")
	bench := c.startRecordedBench(n1, record, "100", "25s", 4)

	c.kill(n4)
	c.kill(n5)
	// With n6 stopped as well, some ranges of n4 have no live replica left.
	if err := n6.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP n6: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	dry := c.kvctl(ctx, n1, "ring", "remove", "n4", "--dry-run")
	cancel()
	if err := n6.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT n6: %v", err)
	}
	for _, l := range strings.Split(dry.stdout, "\n") {
		if strings.Contains(l, "refused") {
			t.Logf("plan: %s", l)
		}
	}
	if dry.code != 3 || !strings.Contains(dry.stdout, "no live replica holds") || !strings.Contains(dry.stdout, "lost") {
		t.Fatalf("plan with n4, n5, n6 down: got exit %d, want 3 naming the ranges without a live replica\nstdout:\n%s\nstderr:\n%s", dry.code, dry.stdout, dry.stderr)
	}
	c.waitServing(n6)

	// n5 would receive some of n4's ranges: refused unless forced.
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	refused := c.kvctl(ctx, n1, "ring", "remove", "n4", "--yes")
	cancel()
	if refused.code != 3 || !strings.Contains(refused.stdout+refused.stderr, "n5 does not answer") || !strings.Contains(refused.stdout+refused.stderr, "under-replicated") {
		t.Fatalf("remove n4 with n5 down: got exit %d, want 3 naming the ranges n5 would receive\nstdout:\n%s\nstderr:\n%s", refused.code, refused.stdout, refused.stderr)
	}
	for _, rm := range []struct {
		id    string
		force bool
	}{{"n4", true}, {"n5", false}} {
		args := []string{"ring", "remove", rm.id, "--yes", "-o", "json"}
		if rm.force {
			args = append(args, "--force")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		r := c.kvctl(ctx, n1, args...)
		cancel()
		p := progressOf(t, r)
		if r.code != 0 || p.GetState() != kvpb.ChangeState_CHANGE_STATE_DONE {
			t.Fatalf("remove %s (down): got exit %d, state %v, error %q\nstderr:\n%s", rm.id, r.code, p.GetState(), p.GetError(), r.stderr)
		}
		if p.GetKeysDone() > p.GetKeysTotal() || p.GetBytesDone() > p.GetBytesTotal() {
			t.Errorf("remove %s: got keys %d of %d, bytes %d of %d: done beyond the total", rm.id, p.GetKeysDone(), p.GetKeysTotal(), p.GetBytesDone(), p.GetBytesTotal())
		}
	}
	c.waitAllUp(n1, []string{"n1", "n2", "n3", "n6", "n7"}, 5)

	bench.wait(t, 2*time.Minute)
	t.Logf("bench:\n%s", tail(&bench.out, 12))
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	check := c.kvctl(ctx, n1, "bench", "check", record, "--ack", "2", "--from", "3")
	if check.code != 0 {
		t.Fatalf("bench check: got exit %d\nstdout:\n%s\nstderr:\n%s", check.code, check.stdout, check.stderr)
	}
	t.Logf("bench check: %s", strings.TrimSpace(check.stdout))
	c.checkReads(live, 2000, 64, nil, 50)
}
