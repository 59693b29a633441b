package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"ringkv/internal/eventually"
	"ringkv/node/ring"
	"ringkv/node/store"
)

// storeSource streams ranges straight out of the source node's real store: the in-process
// stand-in for node/server's Replica.StreamRange client, which lives in another package.
type storeSource map[string]*store.Store

func (s storeSource) StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, _ uint64,
	fn func(batch []store.Entry) error) error {
	st, ok := s[source.ID]
	if !ok {
		return fmt.Errorf("no store for %s", source.ID)
	}
	var batch []store.Entry
	err := st.Scan(ctx, start, end, resumeAfter, func(sk, key []byte, rec store.Record) error {
		token, _ := store.SplitStoreKey(sk)
		batch = append(batch, store.Entry{Token: token, Key: key, Record: rec})
		if len(batch) < 100 {
			return nil
		}
		err := fn(batch)
		batch = batch[:0]
		return err
	})
	if err != nil || len(batch) == 0 {
		return err
	}
	return fn(batch)
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
	return startMoverConfig(t, n, src, sink, func(*MoverConfig) {})
}

// startMoverConfig is startMover with the config changed by tune.
func startMoverConfig(t *testing.T, n *testNode, src RangeSource, sink RangeSink, tune func(*MoverConfig)) (m *Mover, stop func()) {
	t.Helper()
	cfg := DefaultMoverConfig()
	cfg.RetryInterval = 50 * time.Millisecond
	tune(&cfg)
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

// seededStores opens a store for each of ids and writes keys "key-00000"… ("v-"+key, the
// values checkPlacement expects) to their replicas in r.
func seededStores(t *testing.T, r *ring.Ring, ids []string, keys int) storeSource {
	t.Helper()
	stores := storeSource{}
	for _, id := range ids {
		stores[id] = openStore(t, filepath.Join(t.TempDir(), "store-"+id))
	}
	for i := range keys {
		key := fmt.Appendf(nil, "key-%05d", i)
		tok := ring.Token(key)
		for _, m := range r.Lookup(tok, r.ReplicationFactor()) {
			if _, err := stores[m.ID].Apply(tok, key, store.Record{TS: uint64(i + 1), Value: []byte("v-" + string(key))}); err != nil {
				t.Fatalf("seed: %v", err)
			}
		}
	}
	return stores
}

// checkPlacement checks that every key is stored on exactly its replicas in r.
func checkPlacement(t *testing.T, r *ring.Ring, stores storeSource, keys int) {
	t.Helper()
	eventually.Succeeds(t, 10*time.Second, func() error {
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

	const keys = 3000
	r := nodes[0].c.View().Current
	stores := seededStores(t, r, []string{"n1", "n2", "n3", "n4"}, keys)
	movers := map[string]*Mover{}
	counting := &countingSource{src: stores, calls: map[[2]uint64]int{}}
	for _, n := range all {
		movers[n.id], _ = startMover(t, n, counting, stores[n.id])
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
	// Each move is pulled once: a move reported done is not pulled again while this node's
	// FSM has yet to apply its move_done.
	for _, mv := range ch.Moves {
		if got := counting.count(mv.Start, mv.End); got != 1 {
			t.Errorf("move (%d, %d]: got %d pulls, want 1", mv.Start, mv.End, got)
		}
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

// countingSource counts the pulls of each range.
type countingSource struct {
	src   RangeSource
	mu    sync.Mutex
	calls map[[2]uint64]int
}

func (s *countingSource) StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, rate uint64,
	fn func(batch []store.Entry) error) error {
	s.mu.Lock()
	s.calls[[2]uint64{start, end}]++
	s.mu.Unlock()
	return s.src.StreamRange(ctx, source, start, end, resumeAfter, rate, fn)
}

func (s *countingSource) count(start, end uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[[2]uint64{start, end}]
}

// stallingSource passes limit records of each range, then blocks until its context ends: a
// receiver that is killed mid-stream.
type stallingSource struct {
	src      RangeSource
	limit    int
	received atomic.Int64
}

func (s *stallingSource) StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, rate uint64,
	fn func(batch []store.Entry) error) error {
	n := 0
	return s.src.StreamRange(ctx, source, start, end, resumeAfter, rate, func(batch []store.Entry) error {
		for _, e := range batch {
			if n == s.limit {
				<-ctx.Done()
				return ctx.Err()
			}
			n++
			s.received.Add(1)
			if err := fn([]store.Entry{e}); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestMoverReceiverRestartsMidStream(t *testing.T) {
	nodes := startFounders(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newcomer := startNode(t, "n4", listen(t, ""), filepath.Join(t.TempDir(), "n4"), nil)

	const keys = 2000
	r := nodes[0].c.View().Current
	stores := seededStores(t, r, []string{"n1", "n2", "n3", "n4"}, keys)
	for _, n := range nodes {
		startMover(t, n, stores, stores[n.id])
	}
	stalling := &stallingSource{src: stores, limit: 5}
	_, stopMover := startMover(t, newcomer, stalling, stores["n4"])

	ch, err := nodes[1].c.Begin(ctx, ChangeRequest{Kind: KindAdd, NodeID: "n4", Addr: newcomer.addr})
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	eventually.Succeeds(t, 10*time.Second, func() error {
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

// resumeSource records where each range's first pull began.
type resumeSource struct {
	src   RangeSource
	mu    sync.Mutex
	first map[[2]uint64][]byte
}

func (s *resumeSource) StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, rate uint64,
	fn func(batch []store.Entry) error) error {
	s.mu.Lock()
	if _, ok := s.first[[2]uint64{start, end}]; !ok {
		s.first[[2]uint64{start, end}] = slices.Clone(resumeAfter)
	}
	s.mu.Unlock()
	return s.src.StreamRange(ctx, source, start, end, resumeAfter, rate, fn)
}

// A receiver that dies mid-stream pulls on from the points it saved, not from the start:
// with a point after every batch, nothing it had applied comes again.
func TestMoverResumesFromSavedPoint(t *testing.T) {
	nodes := startFounders(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newcomer := startNode(t, "n4", listen(t, ""), filepath.Join(t.TempDir(), "n4"), nil)

	const keys = 2000
	r := nodes[0].c.View().Current
	stores := seededStores(t, r, []string{"n1", "n2", "n3", "n4"}, keys)
	for _, n := range nodes {
		startMover(t, n, stores, stores[n.id])
	}
	everyBatch := func(c *MoverConfig) { c.CheckpointBytes = 1 }
	stalling := &stallingSource{src: stores, limit: 5}
	_, stopMover := startMoverConfig(t, newcomer, stalling, stores["n4"], everyBatch)

	ch, err := nodes[1].c.Begin(ctx, ChangeRequest{Kind: KindAdd, NodeID: "n4", Addr: newcomer.addr})
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	eventually.Succeeds(t, 10*time.Second, func() error {
		if got := stalling.received.Load(); got < 20 {
			return fmt.Errorf("got %d records streamed, want at least 20", got)
		}
		return nil
	})
	stopMover()
	// What the first run saved: a point per move that received records.
	saved := map[[2]uint64]store.MovePoint{}
	for i, mv := range ch.Moves {
		if pt, ok := stores["n4"].MovePoint(ch.ID, i); ok {
			saved[[2]uint64{mv.Start, mv.End}] = pt
		}
	}
	if len(saved) == 0 {
		t.Fatalf("no resume point saved after %d records streamed", stalling.received.Load())
	}
	newcomer = newcomer.restart()
	src := &resumeSource{src: stores, first: map[[2]uint64][]byte{}}
	m, _ := startMoverConfig(t, newcomer, src, stores["n4"], everyBatch)
	waitEpoch(t, append(nodes, newcomer), 2, false)
	checkPlacement(t, nodes[0].c.View().Current, stores, keys)

	src.mu.Lock()
	for rg, pt := range saved {
		if got, ok := src.first[rg]; ok && !bytes.Equal(got, pt.After) {
			t.Errorf("range %v: got the first pull after %x, want after the saved point %x", rg, got, pt.After)
		}
	}
	src.mu.Unlock()
	var resumedFrom, repulled uint64
	for _, p := range m.Progress() {
		resumedFrom += p.ResumedFrom
		repulled += p.Repulled
	}
	var want uint64
	for _, pt := range saved {
		want += pt.Bytes
	}
	if resumedFrom != want || repulled != 0 {
		t.Errorf("got %d bytes resumed from, %d pulled again; want %d (the saved points) and 0", resumedFrom, repulled, want)
	}
	for i := range ch.Moves {
		if pt, ok := stores["n4"].MovePoint(ch.ID, i); ok {
			t.Errorf("move %d done: got its point %+v kept, want it forgotten", i, pt)
		}
	}
}

// deadSource fails every pull from the members in dead: a source that is down.
type deadSource struct {
	src  RangeSource
	dead map[string]bool
}

func (s deadSource) StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, rate uint64,
	fn func(batch []store.Entry) error) error {
	if s.dead[source.ID] {
		return fmt.Errorf("%s: connection refused", source.ID)
	}
	return s.src.StreamRange(ctx, source, start, end, resumeAfter, rate, fn)
}

// When a move's source stays down, the receiver pulls from all of the range's other replicas:
// a write that reached only two of three replicas (a quorum) keeps two copies among the new
// replicas whichever of the others lacks it.
func TestMoverFallsBackToAllOtherReplicas(t *testing.T) {
	nodes := startFounders(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newcomer := startNode(t, "n4", listen(t, ""), filepath.Join(t.TempDir(), "n4"), nil)
	all := append(nodes, newcomer)
	stores := storeSource{}
	for _, n := range all {
		stores[n.id] = openStore(t, filepath.Join(t.TempDir(), "store-"+n.id))
	}
	const keys = 1500
	r := nodes[0].c.View().Current
	for i := range keys {
		key := fmt.Appendf(nil, "key-%05d", i)
		tok := ring.Token(key)
		for j, m := range r.Lookup(tok, r.ReplicationFactor()) {
			if j == i%3 {
				continue // this replica missed the write
			}
			if _, err := stores[m.ID].Apply(tok, key, store.Record{TS: uint64(i + 1), Value: []byte("v-" + string(key))}); err != nil {
				t.Fatalf("seed: %v", err)
			}
		}
	}
	for _, n := range nodes {
		startMover(t, n, stores, stores[n.id])
	}
	startMover(t, newcomer, deadSource{src: stores, dead: map[string]bool{"n1": true}}, stores["n4"])
	if _, err := nodes[0].c.Begin(ctx, ChangeRequest{Kind: KindAdd, NodeID: "n4", Addr: newcomer.addr}); err != nil {
		t.Fatalf("add: %v", err)
	}
	waitEpoch(t, all, 2, false)
	next := nodes[0].c.View().Current
	for i := range keys {
		key := fmt.Appendf(nil, "key-%05d", i)
		tok := ring.Token(key)
		held := 0
		for _, m := range next.Lookup(tok, next.ReplicationFactor()) {
			if _, found, err := stores[m.ID].Get(tok, key); err != nil {
				t.Fatalf("get: %v", err)
			} else if found {
				held++
			}
		}
		if held < 2 {
			t.Errorf("%s: got %d copies on its new replicas, want at least 2", key, held)
		}
	}
}

// failingSource fails each pull from source after limit records: a source that goes away
// mid-stream, again and again.
type failingSource struct {
	src    RangeSource
	source string
	limit  int
}

func (s failingSource) StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, rate uint64,
	fn func(batch []store.Entry) error) error {
	if source.ID != s.source {
		return s.src.StreamRange(ctx, source, start, end, resumeAfter, rate, fn)
	}
	n := 0
	err := s.src.StreamRange(ctx, source, start, end, resumeAfter, rate, func(batch []store.Entry) error {
		for _, e := range batch {
			if n == s.limit {
				return fmt.Errorf("%s: connection reset", source.ID)
			}
			n++
			if err := fn([]store.Entry{e}); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && n == s.limit {
		return fmt.Errorf("%s: connection reset", source.ID)
	}
	return err
}

// A move's count is what its range holds, however often its source failed and however many
// replicas it was pulled from; and with its source dead and one more replica of the range down,
// the receiver settles for the replica that answers.
func TestMoverCountsOnceAndSettles(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  func(storeSource) RangeSource
	}{
		{"source fails mid-stream", func(s storeSource) RangeSource { return failingSource{src: s, source: "n1", limit: 7} }},
		{"source and one replica dead", func(s storeSource) RangeSource {
			return deadSource{src: s, dead: map[string]bool{"n1": true, "n2": true}}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nodes := startFounders(t, 3)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			newcomer := startNode(t, "n4", listen(t, ""), filepath.Join(t.TempDir(), "n4"), nil)
			all := append(nodes, newcomer)
			stores := storeSource{}
			for _, n := range all {
				stores[n.id] = openStore(t, filepath.Join(t.TempDir(), "store-"+n.id))
			}
			const keys = 600
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
			m, _ := startMover(t, newcomer, tt.src(stores), stores["n4"])
			if _, err := nodes[0].c.Begin(ctx, ChangeRequest{Kind: KindAdd, NodeID: "n4", Addr: newcomer.addr}); err != nil {
				t.Fatalf("add: %v", err)
			}
			waitEpoch(t, all, 2, false)
			checkPlacement(t, nodes[0].c.View().Current, stores, keys)
			for _, p := range m.Progress() {
				want, _, err := stores["n4"].CountRange(p.Move.Start, p.Move.End)
				if err != nil {
					t.Fatal(err)
				}
				if p.Keys != want {
					t.Errorf("move %d %s from %s (%d attempts): got %d keys counted, want %d", p.Index,
						ring.FormatRange(p.Move.Start, p.Move.End), p.Move.Source, p.Attempts, p.Keys, want)
				}
			}
		})
	}
}

// tricklingSource passes one record per interval while slow is set, counting them: a slow
// stream that a pause must stop.
type tricklingSource struct {
	src      RangeSource
	interval time.Duration
	slow     atomic.Bool
	received atomic.Int64
}

func (s *tricklingSource) StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, rate uint64,
	fn func(batch []store.Entry) error) error {
	return s.src.StreamRange(ctx, source, start, end, resumeAfter, rate, func(batch []store.Entry) error {
		for _, e := range batch {
			if s.slow.Load() {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(s.interval):
				}
			}
			if err := fn([]store.Entry{e}); err != nil {
				return err
			}
			s.received.Add(1)
		}
		return nil
	})
}

// TestMoverPauseStopsPulls pauses a change through a follower while its ranges stream: the
// receiver's pulls stop (nothing more arrives), the change stays in flight, and once resumed
// it completes with every key on its replicas.
func TestMoverPauseStopsPulls(t *testing.T) {
	nodes := startFounders(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	newcomer := startNode(t, "n4", listen(t, ""), filepath.Join(t.TempDir(), "n4"), nil)
	const keys = 2000
	r := nodes[0].c.View().Current
	stores := seededStores(t, r, []string{"n1", "n2", "n3", "n4"}, keys)
	for _, n := range nodes {
		startMover(t, n, stores, stores[n.id])
	}
	slow := &tricklingSource{src: stores, interval: 5 * time.Millisecond}
	slow.slow.Store(true)
	startMover(t, newcomer, slow, stores["n4"])

	ch, err := nodes[0].c.Begin(ctx, ChangeRequest{Kind: KindAdd, NodeID: "n4", Addr: newcomer.addr})
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	eventually.Succeeds(t, 10*time.Second, func() error {
		if got := slow.received.Load(); got < 20 {
			return fmt.Errorf("got %d records streamed, want at least 20", got)
		}
		return nil
	})
	_, followers := leaderOf(t, nodes)
	if err := followers[0].c.Pause(ctx, "alice", "p99 spike"); err != nil {
		t.Fatalf("pause: %v", err)
	}
	// Within a second of the pause no pull goes on: what arrived stays put.
	eventually.Succeeds(t, 5*time.Second, func() error {
		before := slow.received.Load()
		time.Sleep(time.Second)
		if after := slow.received.Load(); after != before {
			return fmt.Errorf("got %d records in a second while paused, want 0", after-before)
		}
		return nil
	})
	if got := newcomer.c.Change(); got == nil || got.ID != ch.ID || got.Paused() == nil || got.Pending() == 0 {
		t.Fatalf("paused: got change %+v on the receiver, want %d paused with moves pending", got, ch.ID)
	}
	if err := followers[0].c.Pause(ctx, "bob", ""); !errors.Is(err, ErrAlreadyPaused) {
		t.Fatalf("second pause: got %v, want ErrAlreadyPaused", err)
	}
	slow.slow.Store(false)
	if err := nodes[1].c.Resume(ctx, "bob"); err != nil {
		t.Fatalf("resume: %v", err)
	}
	waitEpoch(t, append(nodes, newcomer), 2, false)
	checkPlacement(t, nodes[0].c.View().Current, stores, keys)
	if err := nodes[2].c.Resume(ctx, "bob"); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("resume after the change: got %v, want ErrNotPaused", err)
	}
}
