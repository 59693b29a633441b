package change_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"ringkv/internal/storetest"
	"ringkv/node/change"
	"ringkv/node/cluster"
	"ringkv/node/peers"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeCluster plans with the real ring functions and records Begin: the metadata group's
// journal is what the test must observe, which a real raft group would hide behind a leader.
type fakeCluster struct {
	cur    *ring.Ring
	begins atomic.Int32
}

func (c *fakeCluster) Plan(req cluster.ChangeRequest) (*cluster.Plan, error) {
	next, err := c.cur.WithMember(ring.Member{ID: req.NodeID, Addr: req.Addr}, 8)
	if err != nil {
		return nil, err
	}
	return &cluster.Plan{Request: req, Current: c.cur, Next: next, Moves: ring.Plan(c.cur, next)}, nil
}

func (c *fakeCluster) Begin(_ context.Context, req cluster.ChangeRequest) (*cluster.Change, error) {
	c.begins.Add(1)
	return &cluster.Change{ID: 7, Kind: req.Kind, NodeID: req.NodeID, Addr: req.Addr, RateBytes: req.RateBytes}, nil
}

func (c *fakeCluster) MoveDone(context.Context, uint64, int) error   { return nil }
func (c *fakeCluster) Abort(context.Context, uint64) error           { return nil }
func (c *fakeCluster) SetRate(context.Context, string, uint64) error { return nil }
func (c *fakeCluster) SetParallel(context.Context, int) error        { return nil }
func (c *fakeCluster) Pause(context.Context, string, string) error   { return nil }
func (c *fakeCluster) Resume(context.Context, string) error          { return nil }
func (c *fakeCluster) Change() *cluster.Change                       { return nil }
func (c *fakeCluster) LastChange() *cluster.Change                   { return nil }
func (c *fakeCluster) History(int, uint64) ([]cluster.ChangeRecord, error) {
	return nil, cluster.ErrNoHistory
}
func (c *fakeCluster) Watch() <-chan struct{} { return make(chan struct{}) }
func (c *fakeCluster) View() *ring.View       { return &ring.View{Current: c.cur} }
func (c *fakeCluster) info(context.Context) *kvpb.NodeInfoResponse {
	return &kvpb.NodeInfoResponse{Id: "n1", Epoch: 1}
}

// unreachable is a Dialer for a newcomer that does not answer.
type unreachable struct{}

func (unreachable) Admin(addr string) (kvpb.AdminClient, error) {
	return nil, errors.New("connection refused")
}

// A newcomer that does not answer is a refusal: Start journals nothing without force, and
// journals the change with it. The rule lives in node/change, not in the Admin handler.
func TestStartRefusesUnlessForced(t *testing.T) {
	cur, err := ring.New(1, 2, []ring.Member{{ID: "n1", Addr: "n1:1", Tokens: ring.FounderTokens([]string{"n1"}, 8)["n1"]}})
	if err != nil {
		t.Fatal(err)
	}
	cl := &fakeCluster{cur: cur}
	st := storetest.Open(t)
	storetest.Fill(t, st, 100, 10)
	s := change.New(change.Config{
		Cluster: cl, View: cl.View, Peers: peers.Peers{Self: "n1", Dial: unreachable{}},
		Info: cl.info, Counter: st, DefaultRate: 1 << 20,
	})
	req := &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n2", GrpcAddr: "n2:1"}
	ctx := context.Background()

	plan, err := s.Plan(ctx, req)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if len(plan.GetRefusals()) != 1 || !strings.Contains(plan.GetRefusals()[0], "does not answer") {
		t.Errorf("plan refusals: got %q, want one saying n2 does not answer", plan.GetRefusals())
	}
	if plan.GetEstKeys() != 100 {
		t.Errorf("plan estimate: got %d keys, want 100 (at 2 replicas n2 receives every key)", plan.GetEstKeys())
	}

	if _, err := s.Start(ctx, req); !errors.Is(err, change.ErrRefused) {
		t.Fatalf("start without force: got %v, want %v", err, change.ErrRefused)
	}
	if got := cl.begins.Load(); got != 0 {
		t.Fatalf("start without force journaled %d changes, want 0", got)
	}

	req.Force = true
	plan, err = s.Start(ctx, req)
	if err != nil {
		t.Fatalf("start with force: %v", err)
	}
	if got := cl.begins.Load(); got != 1 || plan.GetId() != 7 || plan.GetRequest().GetRateBytes() != 1<<20 {
		t.Errorf("start with force: %d begun, plan id %d rate %d, want 1 begun, id 7, the default rate %d",
			got, plan.GetId(), plan.GetRequest().GetRateBytes(), 1<<20)
	}
}
