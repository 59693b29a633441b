package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"ringkv/internal/eventually"
)

// TestPauseResumeAnswerLost pauses and resumes a change through a follower whose first try
// the leader applies but whose answer is lost on the way back (Unavailable, as when the
// leader goes mid-call): the follower tries again, the leader refuses the retry as done
// already (ErrAlreadyPaused, ErrNotPaused), and the call succeeds all the same, since that
// earlier try was its own. A pause or resume of someone else's is still refused.
func TestPauseResumeAnswerLost(t *testing.T) {
	var lose atomic.Bool // the next forwarded pause or resume answer is lost
	drop := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil && (strings.HasSuffix(method, "/PauseChange") || strings.HasSuffix(method, "/ResumeChange")) && lose.CompareAndSwap(true, false) {
			return status.Error(codes.Unavailable, "answer lost")
		}
		return err
	})
	nodes := startFounders(t, 3, func(cfg *Config) {
		cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), drop}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// No mover runs: the change's moves stay pending, so it can be paused.
	newcomer := startNode(t, "n4", listen(t, ""), t.TempDir(), nil)
	if _, err := nodes[0].c.Begin(ctx, ChangeRequest{Kind: KindAdd, NodeID: "n4", Addr: newcomer.addr}); err != nil {
		t.Fatalf("add: %v", err)
	}
	// The follower is looked up again before each call: under load, leadership may move.
	follower := func() *testNode {
		_, followers := leaderOf(t, nodes)
		return followers[0]
	}

	// lost runs call through a follower with its first forwarded answer lost. The follower
	// may lead by the time it calls (leadership moves under load) and apply locally: then
	// nothing was lost, and undo puts things back for another go.
	lost := func(what string, call func(*testNode) error, undo func()) {
		t.Helper()
		for range 5 {
			lose.Store(true)
			if err := call(follower()); err != nil {
				t.Fatalf("%s, its answer lost once: got %v, want nil", what, err)
			}
			if !lose.Swap(false) {
				return
			}
			t.Logf("%s: the follower led by then; nothing lost", what)
			undo()
		}
		t.Fatalf("%s: no answer lost in 5 tries", what)
	}

	lost("pause", func(n *testNode) error { return n.c.Pause(ctx, "alice", "p99 spike") }, func() {
		if err := nodes[0].c.Resume(ctx, "undo"); err != nil {
			t.Fatalf("undo the pause: %v", err)
		}
	})
	if err := follower().c.Pause(ctx, "bob", ""); !errors.Is(err, ErrAlreadyPaused) {
		t.Fatalf("bob's pause of alice's: got %v, want ErrAlreadyPaused", err)
	}
	lastPause(t, nodes[0], "alice", "")

	lost("resume", func(n *testNode) error { return n.c.Resume(ctx, "bob") }, func() {
		if err := nodes[0].c.Pause(ctx, "alice", "p99 spike"); err != nil {
			t.Fatalf("undo the resume: %v", err)
		}
	})
	if err := follower().c.Resume(ctx, "bob"); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("resume of a change not paused: got %v, want ErrNotPaused", err)
	}
	lastPause(t, nodes[0], "alice", "bob")
}

// lastPause waits until n's copy shows the change's last pause by by, resumed by resumedBy
// ("": open).
func lastPause(t *testing.T, n *testNode, by, resumedBy string) {
	t.Helper()
	eventually.Succeeds(t, 10*time.Second, func() error {
		ch := n.c.Change()
		if ch == nil || len(ch.Pauses) == 0 {
			return fmt.Errorf("got change %+v, want one paused", ch)
		}
		if p := ch.Pauses[len(ch.Pauses)-1]; p.By != by || p.ResumedBy != resumedBy {
			return fmt.Errorf("got last pause %+v, want by %q, resumed by %q", p, by, resumedBy)
		}
		return nil
	})
}
