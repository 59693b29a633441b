package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"ringkv/node/ring"
	"ringkv/node/store"
)

// storeSource streams ranges straight out of the source node's real store: the in-process
// stand-in for node/server's Replica.StreamRange client, which lives in another package.
type storeSource map[string]*store.Store

func (s storeSource) StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, _ uint64,
	fn func(token uint64, key []byte, rec store.Record) error) error {
	st, ok := s[source.ID]
	if !ok {
		return fmt.Errorf("no store for %s", source.ID)
	}
	return st.Scan(ctx, start, end, resumeAfter, func(sk, key []byte, rec store.Record) error {
		token, _ := store.SplitStoreKey(sk)
		return fn(token, key, rec)
	})
}

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.Dir = dir
	cfg.ValueLogGCInterval = 0
	cfg.Badger = func(o badger.Options) badger.Options {
		return o.WithNumMemtables(2).WithBlockCacheSize(1 << 20).WithIndexCacheSize(1 << 20)
	}
	s, err := store.Open(cfg)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

// startMover runs a mover for n until stop is called or the test ends (before n stops: cleanups
// run last-in first-out).
func startMover(t *testing.T, n *testNode, src RangeSource, sink RangeSink) (m *Mover, stop func()) {
	t.Helper()
	cfg := DefaultMoverConfig()
	cfg.RetryInterval = 50 * time.Millisecond
	m, err := NewMover(n.c, src, sink, cfg)
	if err != nil {
		t.Fatalf("new mover: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return m, stop
}

// checkPlacement checks that every key is stored on exactly its replicas in r.
func checkPlacement(t *testing.T, r *ring.Ring, stores storeSource, keys int) {
	t.Helper()
	waitFor(t, 10*time.Second, func() error {
		for i := range keys {
			key := fmt.Appendf(nil, "key-%05d", i)
			tok := ring.Token(key)
			var replicas []string
			for _, m := range r.Lookup(tok, r.ReplicationFactor()) {
				replicas = append(replicas, m.ID)
			}
			for id, st := range stores {
				rec, found, err := st.Get(tok, key)
				if err != nil {
					return fmt.Errorf("get %s on %s: %w", key, id, err)
				}
				want := slices.Contains(replicas, id)
				if found != want {
					return fmt.Errorf("%s on %s: got stored %v, want %v (replicas %v)", key, id, found, want, replicas)
				}
				if found && string(rec.Value) != "v-"+string(key) {
					return fmt.Errorf("%s on %s: got value %q, want %q", key, id, rec.Value, "v-"+string(key))
				}
			}
		}
		return nil
	})
}

func TestMoverAddThenDrain(t *testing.T) {
	nodes := startFounders(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newcomer := startNode(t, "n4", listen(t, ""), filepath.Join(t.TempDir(), "n4"), nil)
	all := append(nodes, newcomer)

	stores := storeSource{}
	for _, n := range all {
		stores[n.id] = openStore(t, filepath.Join(t.TempDir(), "store-"+n.id))
	}
	const keys = 3000
	r := nodes[0].c.View().Current
	for i := range keys {
		key := fmt.Appendf(nil, "key-%05d", i)
		tok := ring.Token(key)
		for _, m := range r.Lookup(tok, r.ReplicationFactor()) {
			if _, err := stores[m.ID].Apply(tok, key, store.Record{TS: uint64(i + 1), Value: []byte("v-" + string(key))}); err != nil {
				t.Fatalf("seed: %v", err)
			}
		}
	}
	movers := map[string]*Mover{}
	for _, n := range all {
		movers[n.id], _ = startMover(t, n, stores, stores[n.id])
	}

	ch, err := nodes[0].c.Begin(ctx, ChangeRequest{Kind: KindAdd, NodeID: "n4", Addr: newcomer.addr})
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	waitEpoch(t, all, 2, false)
	checkPlacement(t, nodes[0].c.View().Current, stores, keys)
	var got int
	for _, p := range movers["n4"].Progress() {
		if p.ChangeID == ch.ID && p.State == MoveDone {
			got++
		}
	}
	if got != len(ch.Moves) {
		t.Errorf("newcomer progress: got %d moves done, want %d", got, len(ch.Moves))
	}

	// Drain n1: its ranges stream to the new owners, then it deletes everything.
	if _, err := newcomer.c.Begin(ctx, ChangeRequest{Kind: KindRemove, NodeID: "n1"}); err != nil {
		t.Fatalf("drain: %v", err)
	}
	waitEpoch(t, all, 3, false)
	r = newcomer.c.View().Current
	if _, ok := r.Member("n1"); ok {
		t.Errorf("after drain: n1 still in the ring")
	}
	checkPlacement(t, r, stores, keys)
}

// stallingSource passes limit records of each range, then blocks until its context ends: a
// receiver that is killed mid-stream.
type stallingSource struct {
	src      RangeSource
	limit    int
	received atomic.Int64
}

func (s *stallingSource) StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, rate uint64,
	fn func(token uint64, key []byte, rec store.Record) error) error {
	n := 0
	err := s.src.StreamRange(ctx, source, start, end, resumeAfter, rate, func(token uint64, key []byte, rec store.Record) error {
		if n == s.limit {
			<-ctx.Done()
			return ctx.Err()
		}
		n++
		s.received.Add(1)
		return fn(token, key, rec)
	})
	return err
}

func TestMoverReceiverRestartsMidStream(t *testing.T) {
	nodes := startFounders(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newcomer := startNode(t, "n4", listen(t, ""), filepath.Join(t.TempDir(), "n4"), nil)

	stores := storeSource{}
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		stores[id] = openStore(t, filepath.Join(t.TempDir(), "store-"+id))
	}
	const keys = 2000
	r := nodes[0].c.View().Current
	for i := range keys {
		key := fmt.Appendf(nil, "key-%05d", i)
		tok := ring.Token(key)
		for _, m := range r.Lookup(tok, r.ReplicationFactor()) {
			if _, err := stores[m.ID].Apply(tok, key, store.Record{TS: uint64(i + 1), Value: []byte("v-" + string(key))}); err != nil {
				t.Fatalf("seed: %v", err)
			}
		}
	}
	for _, n := range nodes {
		startMover(t, n, stores, stores[n.id])
	}
	stalling := &stallingSource{src: stores, limit: 5}
	_, stopMover := startMover(t, newcomer, stalling, stores["n4"])

	ch, err := nodes[1].c.Begin(ctx, ChangeRequest{Kind: KindAdd, NodeID: "n4", Addr: newcomer.addr})
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	waitFor(t, 10*time.Second, func() error {
		if got := stalling.received.Load(); got < 5 {
			return fmt.Errorf("got %d records streamed, want at least 5", got)
		}
		return nil
	})
	// The receiver dies mid-stream and comes back on the same raft directory.
	stopMover()
	newcomer = newcomer.restart()
	if got := newcomer.c.Change(); got == nil || got.ID != ch.ID || got.Pending() == 0 {
		t.Fatalf("restarted receiver: got change %+v, want %d with moves pending", got, ch.ID)
	}
	startMover(t, newcomer, stores, stores["n4"])
	waitEpoch(t, append(nodes, newcomer), 2, false)
	checkPlacement(t, nodes[0].c.View().Current, stores, keys)
}
