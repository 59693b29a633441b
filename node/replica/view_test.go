package replica

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"ringkv/node/ring"
	"ringkv/node/store"
)

func TestViewIDOrder(t *testing.T) {
	for _, tt := range []struct {
		a, b ring.ViewID
		less bool
	}{
		{ring.ViewID{Epoch: 1}, ring.ViewID{Epoch: 2}, true},
		{ring.ViewID{Epoch: 2, Change: 9}, ring.ViewID{Epoch: 3}, true},
		{ring.ViewID{Epoch: 3, Change: 1}, ring.ViewID{Epoch: 3, Change: 2, InFlight: true}, true}, // change 2 begun
		{ring.ViewID{Epoch: 3, Change: 2, InFlight: true}, ring.ViewID{Epoch: 3, Change: 2}, true}, // change 2 aborted
		{ring.ViewID{Epoch: 3, Change: 2}, ring.ViewID{Epoch: 3, Change: 2}, false},
		{ring.ViewID{Epoch: 3, Change: 2}, ring.ViewID{Epoch: 3, Change: 2, InFlight: true}, false},
		{ring.ViewID{Epoch: 4, Change: 2}, ring.ViewID{Epoch: 3, Change: 5, InFlight: true}, false},
	} {
		if got := tt.a.Less(tt.b); got != tt.less {
			t.Errorf("%+v.Less(%+v) = %v, want %v", tt.a, tt.b, got, tt.less)
		}
	}
}

// Local refuses exactly the writes whose routing a newer view makes wrong.
func TestLocalRefusesStaleViews(t *testing.T) {
	ctx := testCtx(t)
	cur := newRing(t, 3, 2, []string{"n0", "n1"})
	next := newRing(t, 4, 2, []string{"n0", "n1", "n2"})
	settledCur := newRing(t, 3, 2, []string{"n0", "n1", "n2"})
	var view atomic.Pointer[ring.View]
	// A key that n0 does not replicate in the three-node ring.
	var key []byte
	for i := 0; ; i++ {
		key = fmt.Appendf(nil, "key-%d", i)
		if !replicatedBy(settledCur, key, "n0") {
			break
		}
	}
	l := NewLocal(openStore(t), nil, LocalView("n0", view.Load, nil))
	ts := uint64(0)
	write := func(vid ring.ViewID) error {
		ts++
		_, err := l.Write(ctx, key, store.Record{TS: ts, Value: []byte("v")}, vid)
		return err
	}
	changing := &ring.View{Current: cur, Next: next, Change: 7}
	for _, tt := range []struct {
		name  string
		mine  *ring.View
		vid   ring.ViewID
		stale bool
	}{
		{"no ring yet: a newcomer takes every write", nil, ring.ViewID{Epoch: 1}, false},
		{"same view", changing, changing.ID(), false},
		{"sender has not begun the change", changing, ring.ViewID{Epoch: 3, Change: 6}, true},
		{"sender an epoch behind", changing, ring.ViewID{Epoch: 2, Change: 6}, true},
		{"sender has seen the change aborted", changing, ring.ViewID{Epoch: 3, Change: 7}, false},
		{"sender ahead", changing, ring.ViewID{Epoch: 4, Change: 7}, false},
		{"settled, older sender, not a replica", &ring.View{Current: settledCur, Change: 7}, ring.ViewID{Epoch: 2, Change: 6}, true},
		{"settled, same view, not a replica (sender's choice)", &ring.View{Current: settledCur, Change: 7}, ring.ViewID{Epoch: 3, Change: 7}, false},
		{"settled, older sender, a replica", &ring.View{Current: cur, Change: 7}, ring.ViewID{Epoch: 2}, false},
	} {
		view.Store(tt.mine)
		err := write(tt.vid)
		if got := errors.Is(err, ErrStaleView); got != tt.stale || (err != nil && !tt.stale) {
			t.Errorf("%s: Write routed by %+v = %v, want stale=%v", tt.name, tt.vid, err, tt.stale)
		}
	}
}

// Fence waits for the view, then for every write admitted before it to land.
func TestLocalFence(t *testing.T) {
	ctx := testCtx(t)
	var waited atomic.Pointer[ring.ViewID]
	errBehind := errors.New("behind")
	l := NewLocal(openStore(t), nil, LocalView("n0", func() *ring.View { return nil }, func(_ context.Context, vid ring.ViewID) error {
		waited.Store(&vid)
		if vid.Change == 99 {
			return errBehind
		}
		return nil
	}))
	want := ring.ViewID{Epoch: 2, Change: 5, InFlight: true}
	if err := l.Fence(ctx, want); err != nil {
		t.Fatalf("Fence: %v", err)
	}
	if got := waited.Load(); got == nil || *got != want {
		t.Errorf("Fence waited for %v, want %+v", got, want)
	}
	if err := l.Fence(ctx, ring.ViewID{Epoch: 2, Change: 99}); !errors.Is(err, errBehind) {
		t.Errorf("Fence behind = %v, want %v", err, errBehind)
	}

	// A write between its view check and its store write holds the gate shared: Fence must
	// not return before it is done.
	l.gate.RLock()
	done := make(chan error, 1)
	go func() { done <- l.Fence(ctx, want) }()
	select {
	case err := <-done:
		t.Fatalf("Fence returned (%v) while a write admitted before it was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	l.gate.RUnlock()
	if err := <-done; err != nil {
		t.Fatalf("Fence: %v", err)
	}
}

// A coordinator that has not applied a ring change yet writes by the old view; the replicas
// that have begun the change refuse, the coordinator catches up and writes again, and the
// change's pending replica gets the write.
func TestStaleViewWriteRetriedAfterCatchUp(t *testing.T) {
	ctx := testCtx(t)
	cur := newRing(t, 1, 2, []string{"n0", "n1"})
	next := newRing(t, 2, 2, []string{"n0", "n1", "n2"})
	changing := &ring.View{Current: cur, Next: next, Change: 7}
	old := &ring.View{Current: cur, Change: 6}

	c := &cluster{nodes: map[string]*faulty{}}
	for _, id := range []string{"n0", "n1", "n2"} {
		st := openStore(t)
		c.nodes[id] = &faulty{Local: NewLocal(st, nil, LocalView(id, func() *ring.View { return changing }, nil)), st: st, release: make(chan struct{})}
	}
	var key string
	for i := 0; ; i++ {
		key = fmt.Sprintf("key-%d", i)
		if _, pending := changing.WriteSet(ring.Token([]byte(key)), 2); len(pending) == 1 {
			break
		}
	}

	// Without a way to catch up, the write fails on the refusals.
	c.view.Store(old)
	co := c.coordinator(t, "", Config{ReplicaTimeout: 5 * time.Second}, nil)
	_, err := co.Put(ctx, []byte(key), []byte("v1"), 2, 2)
	if !errors.Is(err, ErrNotEnoughReplicas) || !errors.Is(err, ErrStaleView) {
		t.Fatalf("Put by a stale view without CatchUp = %v, want %v and %v", err, ErrNotEnoughReplicas, ErrStaleView)
	}

	var catchUps atomic.Int32
	co2 := c.coordinator(t, "", Config{ReplicaTimeout: 5 * time.Second, CatchUp: func(_ context.Context, stale ring.ViewID) error {
		if stale != old.ID() {
			return fmt.Errorf("caught up from %+v, want %+v", stale, old.ID())
		}
		catchUps.Add(1)
		c.view.Store(changing) // raft brings the change
		return nil
	}}, nil)
	c.view.Store(old)
	if _, err := co2.Put(ctx, []byte(key), []byte("v2"), 2, 2); err != nil {
		t.Fatalf("Put by a stale view with CatchUp: %v", err)
	}
	if n := catchUps.Load(); n != 1 {
		t.Errorf("CatchUp called %d times, want 1", n)
	}
	for id, f := range c.nodes {
		if rec, ok := f.has(t, key); !ok || string(rec.Value) != "v2" {
			t.Errorf("%s holds %q (found %v), want v2", id, rec.Value, ok)
		}
	}
}

func replicatedBy(r *ring.Ring, key []byte, id string) bool {
	for _, m := range r.Lookup(ring.Token(key), r.ReplicationFactor()) {
		if m.ID == id {
			return true
		}
	}
	return false
}
