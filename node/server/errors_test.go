package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"ringkv/internal/storetest"
	"ringkv/node/admin"
	"ringkv/node/change"
	"ringkv/node/cluster"
	"ringkv/node/hlc"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/rpcerr"
)

// refusing is a replica whose every call fails with err: the fault a real store cannot
// produce on demand.
type refusing struct{ err error }

func (r refusing) Read(context.Context, []byte) (store.Record, bool, error) {
	return store.Record{}, false, r.err
}

func (r refusing) Write(context.Context, []byte, store.Record, ring.ViewID) (bool, error) {
	return false, r.err
}

// TestRefusalIsNotRetriedAsStaleView: the errors that share FailedPrecondition with a stale
// view (a refused or unsafe ring change, a change in flight, a busy capture) reach a
// coordinator over real gRPC as themselves, not as ErrStaleView, so it does not wait for a
// newer ring and send the write again. Before the ErrorInfo reason, replica.FromStatus took
// every FailedPrecondition for a stale view and caught up on each of them.
func TestRefusalIsNotRetriedAsStaleView(t *testing.T) {
	tests := []struct {
		err       error
		wantStale bool
	}{
		{change.ErrRefused, false},
		{cluster.ErrUnsafe, false},
		{cluster.ErrChangeInFlight, false},
		{admin.ErrCaptureBusy, false},
		{replica.ErrStaleView, true},
	}
	names := []string{"n0", "n1"}
	tokens := ring.FounderTokens(names, 16)
	r, err := ring.New(1, 2, []ring.Member{{ID: "n0", Addr: "n0", Tokens: tokens["n0"]}, {ID: "n1", Addr: "n1", Tokens: tokens["n1"]}})
	if err != nil {
		t.Fatalf("ring.New: %v", err)
	}
	view := &ring.View{Current: r}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			_, conn := serveReplicaDeps(t, ReplicaDeps{Local: refusing{tt.err}})
			peer := replica.NewRemote(conn, func() uint64 { return 1 })
			var catchUps atomic.Int32
			cfg := replica.DefaultConfig()
			cfg.CatchUp = func(context.Context, ring.ViewID) error { catchUps.Add(1); return nil }
			local := replica.NewLocal(storetest.Open(t), nil)
			co := replica.New(cfg, "n0", func() *ring.View { return view }, local,
				func(ring.Member) replica.Replica { return peer }, hlc.New(nil), nil)
			t.Cleanup(func() { co.Close() })

			_, err := co.Put(context.Background(), []byte("k"), []byte("v"), 2, 2)
			if err == nil {
				t.Fatalf("Put with a peer answering %v: got nil, want an error", tt.err)
			}
			if got := errors.Is(err, replica.ErrStaleView); got != tt.wantStale {
				t.Errorf("Put with a peer answering %v = %v: stale view %v, want %v", tt.err, err, got, tt.wantStale)
			}
			want := int32(0)
			if tt.wantStale {
				want = 1
			}
			if got := catchUps.Load(); got != want {
				t.Errorf("CatchUp called %d times, want %d", got, want)
			}
		})
	}
}

// TestDamagedRangeRefusalOverGRPC: a peer's refusal to read a range it marked damaged reaches
// a coordinator over real gRPC as replica.ErrRangeDamaged (FailedPrecondition with its
// reason), a refusal that keeps the peer's breaker closed; a read that then lacks replicas
// stays a 504.
func TestDamagedRangeRefusalOverGRPC(t *testing.T) {
	names := []string{"n0", "n1"}
	tokens := ring.FounderTokens(names, 16)
	r, err := ring.New(1, 2, []ring.Member{{ID: "n0", Addr: "n0", Tokens: tokens["n0"]}, {ID: "n1", Addr: "n1", Tokens: tokens["n1"]}})
	if err != nil {
		t.Fatalf("ring.New: %v", err)
	}
	view := &ring.View{Current: r}
	_, conn := serveReplicaDeps(t, ReplicaDeps{Local: refusing{fmt.Errorf("local read: %w", replica.ErrRangeDamaged)}})
	peer := replica.NewRemote(conn, func() uint64 { return 1 })
	local := replica.NewLocal(storetest.Open(t), nil)
	co := replica.New(replica.DefaultConfig(), "n0", func() *ring.View { return view }, local,
		func(ring.Member) replica.Replica { return peer }, hlc.New(nil), nil)
	t.Cleanup(func() { co.Close() })
	for range 2 * replica.DefaultConfig().BreakerFailures {
		_, _, err := co.Get(context.Background(), []byte("k"), 2, 2)
		if !errors.Is(err, replica.ErrRangeDamaged) || !errors.Is(err, replica.ErrNotEnoughReplicas) || rpcerr.HTTPStatus(err) != 504 {
			t.Fatalf("Get with ack=2 and the peer's range damaged: got %v (HTTP %d), want ErrNotEnoughReplicas wrapping ErrRangeDamaged, 504", err, rpcerr.HTTPStatus(err))
		}
	}
	for _, b := range co.Breakers() {
		if b.State != replica.BreakerClosed {
			t.Fatalf("breaker of %s after refusals: got %s, want closed", b.Peer, b.State)
		}
	}
}

// TestNotAdmittedPeerKeepsBreakerClosed: a peer that answers a write with "awaiting
// admission" (a node that lost or has not yet got its ring) answered: over real gRPC the
// coordinator counts it as a live refusal, as it counts its own ErrNotAdmitted, and the
// peer's breaker stays closed. replica.FromStatus used to turn that answer into
// ErrReplicaUnavailable, a failure that opened the breaker.
func TestNotAdmittedPeerKeepsBreakerClosed(t *testing.T) {
	names := []string{"n0", "n1"}
	tokens := ring.FounderTokens(names, 16)
	r, err := ring.New(1, 2, []ring.Member{{ID: "n0", Addr: "n0", Tokens: tokens["n0"]}, {ID: "n1", Addr: "n1", Tokens: tokens["n1"]}})
	if err != nil {
		t.Fatalf("ring.New: %v", err)
	}
	view := &ring.View{Current: r}
	_, conn := serveReplicaDeps(t, ReplicaDeps{Local: refusing{replica.ErrNotAdmitted}})
	peer := replica.NewRemote(conn, func() uint64 { return 1 })
	local := replica.NewLocal(storetest.Open(t), nil)
	co := replica.New(replica.DefaultConfig(), "n0", func() *ring.View { return view }, local,
		func(ring.Member) replica.Replica { return peer }, hlc.New(nil), nil)
	t.Cleanup(func() { co.Close() })
	for range 2 * replica.DefaultConfig().BreakerFailures {
		_, err := co.Put(context.Background(), []byte("k"), []byte("v"), 2, 2)
		if !errors.Is(err, replica.ErrNotAdmitted) || !errors.Is(err, replica.ErrNotEnoughReplicas) {
			t.Fatalf("Put with ack=2 and the peer awaiting admission: got %v, want ErrNotEnoughReplicas wrapping ErrNotAdmitted", err)
		}
	}
	for _, b := range co.Breakers() {
		if b.State != replica.BreakerClosed {
			t.Fatalf("breaker of %s after refusals: got %s, want closed", b.Peer, b.State)
		}
	}
}
