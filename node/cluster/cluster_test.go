package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"ringkv/internal/eventually"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testNode is one member on real raft over a real gRPC server on loopback and a real disk.
type testNode struct {
	t      *testing.T
	id     string
	addr   string
	dir    string
	peers  []Peer
	srv    *grpc.Server
	c      *Cluster
	cancel context.CancelFunc
	done   chan struct{}
}

func testConfig(id, addr, dir string, peers []Peer) Config {
	cfg := DefaultConfig()
	cfg.ID, cfg.GRPCAddr, cfg.Dir, cfg.Peers = id, addr, dir, peers
	cfg.Vnodes = 16
	cfg.HeartbeatTimeout = 150 * time.Millisecond
	cfg.ElectionTimeout = 150 * time.Millisecond
	cfg.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.ReconcileInterval = 50 * time.Millisecond
	cfg.ApplyTimeout = 2 * time.Second
	cfg.RemoveGrace = 300 * time.Millisecond
	cfg.DeadVoterAfter = time.Second
	cfg.RaftLogLevel = "off"
	return cfg
}

// listen reserves a loopback port, or rebinds addr when it is set.
func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var lis net.Listener
	var err error
	eventually.Succeeds(t, 5*time.Second, func() error {
		lis, err = net.Listen("tcp", addr)
		return err
	})
	return lis
}

// startNode starts a member with testConfig, then each edit applied to it.
func startNode(t *testing.T, id string, lis net.Listener, dir string, peers []Peer, edit ...func(*Config)) *testNode {
	t.Helper()
	n := &testNode{t: t, id: id, addr: lis.Addr().String(), dir: dir, peers: peers}
	cfg := testConfig(id, n.addr, dir, peers)
	for _, e := range edit {
		e(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		lis.Close()
		t.Fatalf("new %s: %v", id, err)
	}
	n.c = c
	n.srv = grpc.NewServer()
	c.Register(n.srv)
	go func() { _ = n.srv.Serve(lis) }()
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan struct{})
	go func() {
		defer close(n.done)
		_ = c.Run(ctx)
	}()
	t.Cleanup(n.stop)
	return n
}

// stop ends Run, closes the member and its gRPC server; idempotent.
func (n *testNode) stop() {
	if n.c == nil {
		return
	}
	n.cancel()
	<-n.done
	if err := n.c.Close(); err != nil {
		n.t.Errorf("close %s: %v", n.id, err)
	}
	n.srv.Stop()
	n.c = nil
}

// restart brings the node back on the same address and directory.
func (n *testNode) restart() *testNode {
	n.t.Helper()
	n.stop()
	return startNode(n.t, n.id, listen(n.t, n.addr), n.dir, n.peers)
}

// startFounders starts count founders with the same --peers list, each config edited as
// startNode does.
func startFounders(t *testing.T, count int, edit ...func(*Config)) []*testNode {
	t.Helper()
	base := t.TempDir()
	var lis []net.Listener
	var peers []Peer
	for i := range count {
		l := listen(t, "")
		lis = append(lis, l)
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: l.Addr().String()})
	}
	var nodes []*testNode
	for i, p := range peers {
		nodes = append(nodes, startNode(t, p.ID, lis[i], filepath.Join(base, p.ID), peers, edit...))
	}
	eventually.Succeeds(t, 10*time.Second, func() error {
		for _, n := range nodes {
			if !n.c.fsm.load().journaled {
				return fmt.Errorf("%s: ring not journaled yet", n.id)
			}
		}
		return nil
	})
	return nodes
}

func leaderOf(t *testing.T, nodes []*testNode) (leader *testNode, followers []*testNode) {
	t.Helper()
	eventually.Succeeds(t, 10*time.Second, func() error {
		leader, followers = nil, nil
		for _, n := range nodes {
			if n.c == nil {
				continue
			}
			if n.c.IsLeader() {
				leader = n
			} else {
				followers = append(followers, n)
			}
		}
		if leader == nil {
			return errors.New("no leader")
		}
		for _, f := range followers {
			if id, _ := f.c.Leader(); id != leader.id {
				return fmt.Errorf("%s sees leader %q, want %s", f.id, id, leader.id)
			}
		}
		return nil
	})
	return leader, followers
}

func memberIDs(r *ring.Ring) []string {
	var ids []string
	for _, m := range r.Members() {
		ids = append(ids, m.ID)
	}
	return ids
}

// waitEpoch waits until every node is at epoch with a change in flight or not. 30 s: a
// change that streams took longer than 10 s at a load average of 30; a quiet machine takes
// well under a second.
func waitEpoch(t *testing.T, nodes []*testNode, epoch uint64, inFlight bool) {
	t.Helper()
	eventually.Succeeds(t, 30*time.Second, func() error {
		for _, n := range nodes {
			if got := n.c.Epoch(); got != epoch {
				return fmt.Errorf("%s: got epoch %d, want %d", n.id, got, epoch)
			}
			if got := n.c.Change() != nil; got != inFlight {
				return fmt.Errorf("%s: got change in flight %v, want %v", n.id, got, inFlight)
			}
		}
		return nil
	})
}

// finishMoves marks every move of the change in flight done, as the movers would.
func finishMoves(t *testing.T, ctx context.Context, via *Cluster, ch *Change) {
	t.Helper()
	for i := range ch.Moves {
		if err := via.MoveDone(ctx, ch.ID, i); err != nil {
			t.Fatalf("move %d done: %v", i, err)
		}
	}
}

func TestFoundersAgree(t *testing.T) {
	nodes := startFounders(t, 3)
	leaderOf(t, nodes)
	want := nodes[0].c.View().Current
	for _, n := range nodes {
		v := n.c.View()
		if got := v.Current.Epoch(); got != 1 {
			t.Errorf("%s: got epoch %d, want 1", n.id, got)
		}
		if v.Next != nil {
			t.Errorf("%s: got a next ring, want none", n.id)
		}
		if got, want := fmt.Sprint(v.Current.Ranges()), fmt.Sprint(want.Ranges()); got != want {
			t.Errorf("%s: got ranges %s, want %s", n.id, got, want)
		}
		if got, want := len(v.Current.Members()), 3; got != want {
			t.Errorf("%s: got %d members, want %d", n.id, got, want)
		}
		if got := n.c.Role(); got != kvpb.RaftRole_RAFT_ROLE_LEADER && got != kvpb.RaftRole_RAFT_ROLE_FOLLOWER {
			t.Errorf("%s: got role %s, want leader or follower", n.id, got)
		}
	}
}

func TestRestartRecoversRing(t *testing.T) {
	nodes := startFounders(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Move the ring past the founders' epoch so that recovery cannot be the founders' ring. With
	// three nodes and N=3 every node holds everything: removing one moves nothing, and the leader
	// commits the change at once.
	_, followers := leaderOf(t, nodes)
	ch, err := followers[0].c.Begin(ctx, ChangeRequest{Kind: KindRemove, NodeID: "n3", Force: true})
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if len(ch.Moves) != 0 {
		t.Fatalf("remove from 3 nodes at N=3: got %d moves, want 0", len(ch.Moves))
	}
	waitEpoch(t, nodes, 2, false)
	want := fmt.Sprint(nodes[0].c.View().Current.Ranges())

	// One member restarts while the others run: it catches up from disk and the group.
	nodes[1] = nodes[1].restart()
	if got := nodes[1].c.Epoch(); got != 2 {
		t.Errorf("restarted member before rejoining: got epoch %d, want 2", got)
	}
	// All stop; one restarts alone, without a quorum: it serves its last ring.
	for _, n := range nodes {
		n.stop()
	}
	alone := nodes[0].restart()
	v := alone.c.View()
	if v == nil {
		t.Fatal("restarted alone: got no ring, want the last one")
	}
	if got := v.Current.Epoch(); got != 2 {
		t.Errorf("restarted alone: got epoch %d, want 2", got)
	}
	if got := fmt.Sprint(v.Current.Ranges()); got != want {
		t.Errorf("restarted alone: got ranges %s, want %s", got, want)
	}
	if got := fmt.Sprint(memberIDs(v.Current)); got != "[n1 n2]" {
		t.Errorf("restarted alone: got members %s, want [n1 n2]", got)
	}
	if got := alone.c.LastChange(); got == nil || got.ID != ch.ID || got.Outcome != OutcomeCommitted {
		t.Errorf("restarted alone: got last change %+v, want %d committed", got, ch.ID)
	}
}

func TestAddCommitFlipsEpochEverywhere(t *testing.T) {
	nodes := startFounders(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	newcomer := startNode(t, "n4", listen(t, ""), filepath.Join(t.TempDir(), "n4"), nil)
	if v := newcomer.c.View(); v != nil {
		t.Fatalf("node awaiting admission: got view %v, want none", v)
	}

	_, followers := leaderOf(t, nodes)
	ch, err := followers[0].c.Begin(ctx, ChangeRequest{Kind: KindAdd, NodeID: "n4", Addr: newcomer.addr})
	if err != nil {
		t.Fatalf("begin via follower: %v", err)
	}
	if len(ch.Moves) == 0 {
		t.Fatal("add: got no moves, want some")
	}
	for _, m := range ch.Moves {
		if m.Target != "n4" {
			t.Errorf("move %+v: got target %s, want n4", m, m.Target)
		}
	}
	all := append(nodes, newcomer)
	waitEpoch(t, all, 1, true) // the newcomer is admitted to raft and sees the change
	if v := newcomer.c.View(); v.Next == nil || v.Next.Epoch() != 2 {
		t.Fatalf("newcomer: got view %+v, want a next ring at epoch 2", v)
	}

	// A second change while one is in flight is refused, through forwarding too.
	for _, n := range all {
		_, err := n.c.Begin(ctx, ChangeRequest{Kind: KindRemove, NodeID: "n1", Force: true})
		if !errors.Is(err, ErrChangeInFlight) {
			t.Errorf("second change via %s: got %v, want ErrChangeInFlight", n.id, err)
		}
	}

	finishMoves(t, ctx, newcomer.c, ch)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := newcomer.c.WaitEpoch(wctx, 2); err != nil {
		t.Fatalf("newcomer: wait for epoch 2: %v", err)
	}
	waitEpoch(t, all, 2, false)
	for _, n := range all {
		if got := fmt.Sprint(memberIDs(n.c.View().Current)); got != "[n1 n2 n3 n4]" {
			t.Errorf("%s: got members %s, want [n1 n2 n3 n4]", n.id, got)
		}
	}
	// A committed member joins raft; four members keep three voters, so it does not vote.
	eventually.Succeeds(t, 10*time.Second, func() error {
		if got := newcomer.c.Role(); got != kvpb.RaftRole_RAFT_ROLE_NONVOTER {
			return fmt.Errorf("newcomer: got role %s, want a non-voter", got)
		}
		return nil
	})
}

func TestRefusals(t *testing.T) {
	nodes := startFounders(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leaderOf(t, nodes)
	tests := []struct {
		name string
		req  ChangeRequest
		want error
	}{
		{"remove with only N left", ChangeRequest{Kind: KindRemove, NodeID: "n1"}, ErrUnsafe},
		{"remove unknown", ChangeRequest{Kind: KindRemove, NodeID: "nope"}, ErrUnknownMember},
		{"add existing id", ChangeRequest{Kind: KindAdd, NodeID: "n2", Addr: "127.0.0.1:1"}, ErrMemberExists},
		{"add existing addr", ChangeRequest{Kind: KindAdd, NodeID: "x", Addr: nodes[0].addr}, ErrMemberExists},
		{"bad kind", ChangeRequest{Kind: "rebalance"}, ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range nodes {
				if _, err := n.c.Begin(ctx, tt.req); !errors.Is(err, tt.want) {
					t.Errorf("via %s: got %v, want %v", n.id, err, tt.want)
				}
			}
		})
	}
	if err := nodes[0].c.Abort(ctx, 0); !errors.Is(err, ErrNoChange) {
		t.Errorf("abort without a change: got %v, want ErrNoChange", err)
	}
}

func TestLeaderKilledMidChange(t *testing.T) {
	for _, finish := range []string{"commit", "abort"} {
		t.Run(finish, func(t *testing.T) {
			nodes := startFounders(t, 3)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			newcomer := startNode(t, "n4", listen(t, ""), filepath.Join(t.TempDir(), "n4"), nil)
			all := append(nodes, newcomer)

			leader, _ := leaderOf(t, nodes)
			ch, err := leader.c.Begin(ctx, ChangeRequest{Kind: KindAdd, NodeID: "n4", Addr: newcomer.addr})
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			waitEpoch(t, all, 1, true)
			if err := newcomer.c.MoveDone(ctx, ch.ID, 0); err != nil {
				t.Fatalf("first move done: %v", err)
			}
			leader.stop()

			var rest []*testNode
			for _, n := range all {
				if n != leader {
					rest = append(rest, n)
				}
			}
			newLeader, _ := leaderOf(t, rest)
			var got *Change
			eventually.Succeeds(t, 10*time.Second, func() error {
				got = newLeader.c.Change()
				if got == nil || got.ID != ch.ID {
					return fmt.Errorf("new leader %s: got change %+v, want %d in flight", newLeader.id, got, ch.ID)
				}
				if !got.Moves[0].Done {
					return fmt.Errorf("new leader %s: got move 0 pending, want done", newLeader.id)
				}
				return nil
			})
			switch finish {
			case "commit":
				finishMoves(t, ctx, newcomer.c, got)
				waitEpoch(t, rest, 2, false)
			case "abort":
				if err := newcomer.c.Abort(ctx, ch.ID); err != nil {
					t.Fatalf("abort: %v", err)
				}
				// The newcomer leaves raft with the abort and may not learn of it: check the founders.
				var founders []*testNode
				for _, n := range rest {
					if n != newcomer {
						founders = append(founders, n)
					}
				}
				waitEpoch(t, founders, 1, false)
				for _, n := range founders {
					if got := fmt.Sprint(memberIDs(n.c.View().Current)); got != "[n1 n2 n3]" {
						t.Errorf("%s: got members %s, want [n1 n2 n3]", n.id, got)
					}
					if got := n.c.LastChange(); got == nil || got.Outcome != OutcomeAborted {
						t.Errorf("%s: got last change %+v, want aborted", n.id, got)
					}
				}
			}
		})
	}
}
