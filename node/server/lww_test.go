package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"ringkv/internal/eventually"
	"ringkv/internal/storetest"
	"ringkv/node/hlc"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/store"
)

// lwwNode is one node of a three-node cluster over real gRPC: its store, its Replica
// service (the batch path without a goroutine per item) and its coordinator, whose peers are
// batching Remotes (writes completed by the streams' receivers).
type lwwNode struct {
	id    string
	st    *store.Store
	srv   *batchServer
	coord *replica.Coordinator
}

// skewedClock is a wall clock that jumps by up to ±spread on every reading: coordinators on
// such clocks stamp their writes in an order unrelated to when they send them.
func skewedClock(seed uint64, spread time.Duration) func() time.Time {
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(seed, seed))
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Add(time.Duration(rnd.Int64N(int64(2*spread))) - spread)
	}
}

func startLWWCluster(t *testing.T) []*lwwNode {
	t.Helper()
	nodes := make([]*lwwNode, 3)
	ms := make([]ring.Member, 3)
	names := []string{"n0", "n1", "n2"}
	tokens := ring.FounderTokens(names, 16)
	for i, id := range names {
		st := storetest.Open(t)
		n := &lwwNode{id: id, st: st}
		n.srv = startBatchServer(t, ReplicaDeps{Local: replica.NewLocal(st, nil)}, "")
		nodes[i] = n
		ms[i] = ring.Member{ID: id, Addr: n.srv.addr, Tokens: tokens[id]}
	}
	r, err := ring.New(1, 3, ms)
	if err != nil {
		t.Fatalf("ring.New: %v", err)
	}
	view := &ring.View{Current: r}
	for i, n := range nodes {
		remotes := map[string]replica.Replica{}
		for _, m := range nodes {
			if m != n {
				rm, _ := m.srv.remote(t, "")
				remotes[m.id] = rm
			}
		}
		cfg := replica.DefaultConfig()
		cfg.ReplicaTimeout = 5 * time.Second
		n.coord = replica.New(cfg, n.id, func() *ring.View { return view }, replica.NewLocal(n.st, nil),
			func(m ring.Member) replica.Replica { return remotes[m.ID] },
			hlc.New(skewedClock(uint64(i+1), 20*time.Millisecond)), nil)
		t.Cleanup(func() { n.coord.Close() })
	}
	return nodes
}

// Concurrent writers with skewed clocks, through three coordinators at once, writing and
// deleting the same few keys: once the writes settle, every replica holds, for each key, the
// newest record any writer was acknowledged for (last-write-wins by timestamp, a tombstone
// winning a tie).
func TestLWWConcurrentCoordinators(t *testing.T) {
	ctx := batchCtx(t)
	nodes := startLWWCluster(t)
	const keys, writers, writes = 6, 4, 60
	var mu sync.Mutex
	newest := map[string]store.Record{}
	var wg sync.WaitGroup
	for ni, n := range nodes {
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rnd := rand.New(rand.NewPCG(uint64(ni), uint64(w)))
				for i := range writes {
					key := fmt.Sprintf("k%d", rnd.IntN(keys))
					var rec store.Record
					var err error
					if rnd.IntN(4) == 0 {
						rec.Tombstone = true
						rec.TS, err = n.coord.Delete(ctx, []byte(key), 0, 0)
					} else {
						rec.Value = fmt.Appendf(nil, "%s/%d/%d", n.id, w, i)
						rec.TS, err = n.coord.Put(ctx, []byte(key), rec.Value, 0, 0)
					}
					if err != nil {
						t.Errorf("%s write %s: %v", n.id, key, err)
						return
					}
					mu.Lock()
					if cur, ok := newest[key]; !ok || rec.Newer(cur) {
						newest[key] = rec
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for key, want := range newest {
		for _, n := range nodes {
			eventually.Succeeds(t, 10*time.Second, func() error {
				got, found, err := n.st.Get(ring.Token([]byte(key)), []byte(key))
				switch {
				case err != nil:
					return err
				case !found:
					return fmt.Errorf("replica %s: %s absent, want ts %d", n.id, key, want.TS)
				case got.TS != want.TS || got.Tombstone != want.Tombstone || string(got.Value) != string(want.Value):
					return fmt.Errorf("replica %s: %s got ts %d tombstone %v %q, want ts %d tombstone %v %q",
						n.id, key, got.TS, got.Tombstone, got.Value, want.TS, want.Tombstone, want.Value)
				}
				return nil
			})
		}
	}
}

// A tombstone older than a write never hides it, and a newer one always does, whichever
// reaches the replica first: sent together in one batch message (one group commit), or one
// after the other, in both orders.
func TestLWWTombstoneOrder(t *testing.T) {
	ctx := batchCtx(t)
	st := storetest.Open(t)
	srv := startBatchServer(t, ReplicaDeps{Local: replica.NewLocal(st, nil)}, "")
	r, _ := srv.remote(t, "")
	rnd := rand.New(rand.NewPCG(7, 7))
	for i := range 200 {
		key := fmt.Appendf(nil, "t%d", i)
		value := store.Record{TS: 1000 + uint64(rnd.IntN(100)), Value: []byte("v")}
		tomb := store.Record{TS: 1000 + uint64(rnd.IntN(100)), Tombstone: true}
		first, second := value, tomb
		if i%2 == 1 {
			first, second = tomb, value
		}
		if i%4 < 2 {
			// Together: both in flight at once, so that they share a message.
			var wg sync.WaitGroup
			for _, rec := range []store.Record{first, second} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := r.Write(ctx, key, rec, ring.ViewID{}); err != nil {
						t.Errorf("write %s: %v", key, err)
					}
				}()
			}
			wg.Wait()
		} else {
			for _, rec := range []store.Record{first, second} {
				if _, err := r.Write(ctx, key, rec, ring.ViewID{}); err != nil {
					t.Fatalf("write %s: %v", key, err)
				}
			}
		}
		got, found, err := r.Read(ctx, key)
		if err != nil || !found {
			t.Fatalf("read %s: found %v, err %v", key, found, err)
		}
		want := value
		if tomb.Newer(value) {
			want = tomb
		}
		if got.TS != want.TS || got.Tombstone != want.Tombstone {
			t.Errorf("%s: value ts %d, tombstone ts %d: got ts %d tombstone %v, want ts %d tombstone %v",
				key, value.TS, tomb.TS, got.TS, got.Tombstone, want.TS, want.Tombstone)
		}
	}
}

// A write sent by WriteAsync to a replica that holds it completes, without a goroutine
// waiting for it, when its context ends (DeadlineExceeded), exactly once; the stream goes on
// serving, and the held write's late answer is dropped.
func TestRemoteWriteAsyncDeadline(t *testing.T) {
	ctx := batchCtx(t)
	st := storetest.Open(t)
	g := &gate{Replica: replica.NewLocal(st, nil), key: []byte("held"), entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := startBatchServer(t, ReplicaDeps{Local: g}, "")
	r, _ := srv.remote(t, "")
	// The stream is open and the connection ready once a write went through.
	if _, err := r.Write(ctx, []byte("first"), store.Record{TS: 1, Value: []byte("f")}, ring.ViewID{}); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 2)
	if !r.WriteAsync(dctx, []byte("held"), store.Record{TS: 2, Value: []byte("h")}, ring.ViewID{}, func(_ bool, err error) {
		done <- err
	}) {
		t.Fatal("WriteAsync on a ready batching Remote: got false, want true")
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("held write past its deadline: got %v, want DeadlineExceeded", err)
		}
	case <-ctx.Done():
		t.Fatal("held write never completed")
	}
	close(g.release)
	if _, err := r.Write(ctx, []byte("after"), store.Record{TS: 3, Value: []byte("a")}, ring.ViewID{}); err != nil {
		t.Errorf("write after the abandoned one: %v", err)
	}
	applied := make(chan error, 1)
	if !r.WriteAsync(ctx, []byte("async"), store.Record{TS: 4, Value: []byte("v")}, ring.ViewID{}, func(ok bool, err error) {
		if err == nil && !ok {
			err = errors.New("not applied")
		}
		applied <- err
	}) {
		t.Fatal("WriteAsync: got false, want true")
	}
	if err := <-applied; err != nil {
		t.Errorf("async write: %v", err)
	}
	select {
	case err := <-done:
		t.Errorf("the abandoned write completed twice (second: %v)", err)
	default:
	}
}
