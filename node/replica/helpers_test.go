package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/goleak"

	"ringkv/node/hints"
	"ringkv/node/hlc"
	"ringkv/node/ring"
	"ringkv/node/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openStore opens a small real badger store in a temp dir.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.ValueLogGCInterval = 0
	cfg.Badger = func(o badger.Options) badger.Options {
		return o.WithMemTableSize(8 << 20).WithNumMemtables(2).WithBlockCacheSize(1 << 20)
	}
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("store.Close: %v", err)
		}
	})
	return st
}

// mode is what a faulty replica does with a call.
type mode int32

const (
	modeOK   mode = iota
	modeDown      // fail at once with ErrReplicaUnavailable
	modeHang      // block until released or the call's context ends
)

// faulty wraps a real Local to inject the faults a real store cannot:
// an unreachable node and a hanging one. Safe for concurrent use.
type faulty struct {
	*Local
	st     *store.Store
	mode   atomic.Int32
	reads  atomic.Int64
	writes atomic.Int64

	mu      sync.Mutex
	release chan struct{} // closed to release hanging calls
}

func newFaulty(st *store.Store) *faulty {
	return &faulty{Local: NewLocal(st, nil), st: st, release: make(chan struct{})}
}

func (f *faulty) set(m mode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if mode(f.mode.Load()) == modeHang && m != modeHang {
		close(f.release)
		f.release = make(chan struct{})
	}
	f.mode.Store(int32(m))
}

func (f *faulty) gate(ctx context.Context) error {
	switch mode(f.mode.Load()) {
	case modeDown:
		return ErrReplicaUnavailable
	case modeHang:
		f.mu.Lock()
		rel := f.release
		f.mu.Unlock()
		select {
		case <-rel:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (f *faulty) Read(ctx context.Context, key []byte) (store.Record, bool, error) {
	f.reads.Add(1)
	if err := f.gate(ctx); err != nil {
		return store.Record{}, false, err
	}
	return f.Local.Read(ctx, key)
}

func (f *faulty) Write(ctx context.Context, key []byte, rec store.Record, vid ring.ViewID) (bool, error) {
	f.writes.Add(1)
	if err := f.gate(ctx); err != nil {
		return false, err
	}
	return f.Local.Write(ctx, key, rec, vid)
}

// WriteAsync is Local's while the replica is up; down or hanging, it declines (false), so
// the call goes by Write and its fault.
func (f *faulty) WriteAsync(ctx context.Context, key []byte, rec store.Record, vid ring.ViewID, done func(bool, error)) bool {
	if mode(f.mode.Load()) != modeOK {
		return false
	}
	f.writes.Add(1)
	return f.Local.WriteAsync(ctx, key, rec, vid, done)
}

// has reports the record the node's store holds for key.
func (f *faulty) has(t testing.TB, key string) (store.Record, bool) {
	t.Helper()
	rec, found, err := f.st.Get(ring.Token([]byte(key)), []byte(key))
	if err != nil {
		t.Fatalf("store.Get(%q): %v", key, err)
	}
	return rec, found
}

// put stores rec for key directly in the node's store.
func (f *faulty) put(t testing.TB, key string, rec store.Record) {
	t.Helper()
	if _, err := f.st.Apply(ring.Token([]byte(key)), []byte(key), rec); err != nil {
		t.Fatalf("store.Apply(%q): %v", key, err)
	}
}

// cluster is n real stores behind faulty wrappers, and a ring over them.
type cluster struct {
	nodes map[string]*faulty
	view  atomic.Pointer[ring.View]
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%d", i)
	}
	return out
}

func newRing(t testing.TB, epoch uint64, replicas int, names []string) *ring.Ring {
	t.Helper()
	tokens := ring.FounderTokens(names, 64)
	ms := make([]ring.Member, len(names))
	for i, id := range names {
		ms[i] = ring.Member{ID: id, Addr: id, Tokens: tokens[id]}
	}
	r, err := ring.New(epoch, replicas, ms)
	if err != nil {
		t.Fatalf("ring.New: %v", err)
	}
	return r
}

func newCluster(t testing.TB, n int) *cluster {
	t.Helper()
	c := &cluster{nodes: map[string]*faulty{}}
	names := ids(n)
	for _, id := range names {
		c.nodes[id] = newFaulty(openStore(t))
	}
	c.view.Store(&ring.View{Current: newRing(t, 1, 3, names)})
	return c
}

// memHints returns a hint log in memory bounded by maxBytes, closed at cleanup (after a
// coordinator made after it).
func memHints(t testing.TB, maxBytes int64) *hints.Log {
	t.Helper()
	h, err := hints.Open(hints.Config{InMemory: true, MaxBytes: maxBytes, MaxAge: 3 * time.Hour})
	if err != nil {
		t.Fatalf("open hints in memory: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// coordinator returns a coordinator on node self ("" for a node outside the ring), with a
// hint log in memory unless cfg has one. Close runs at cleanup, before the stores close.
func (c *cluster) coordinator(t testing.TB, self string, cfg Config, obs Observer) *Coordinator {
	t.Helper()
	if cfg.Hints == nil {
		cfg.Hints = memHints(t, 64<<20)
	}
	return c.newCoordinator(t, self, cfg, obs)
}

// newCoordinator is coordinator without a hint log of its own: cfg.Hints nil is no hints.
func (c *cluster) newCoordinator(t testing.TB, self string, cfg Config, obs Observer) *Coordinator {
	t.Helper()
	var local Replica
	if f, ok := c.nodes[self]; ok {
		local = f
	}
	co := New(cfg, self, c.view.Load, local, func(m ring.Member) Replica {
		if f, ok := c.nodes[m.ID]; ok {
			return f
		}
		return nil
	}, hlc.New(nil), obs)
	t.Cleanup(func() {
		// Release hanging replicas' callers first: Close cancels their calls.
		if err := co.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return co
}

// testCtx bounds a test's operations so that a bug fails instead of hanging.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// countingObserver counts read reconciliations and operations.
type countingObserver struct {
	repairs atomic.Int64
	ops     atomic.Int64
	failed  atomic.Int64
	hints   atomic.Int64
}

func (o *countingObserver) Hint() { o.hints.Add(1) }

func (o *countingObserver) ObserveOp(op Op, role Role, d time.Duration, err error) {
	o.ops.Add(1)
	if err != nil {
		o.failed.Add(1)
	}
}

func (o *countingObserver) Reconciled() { o.repairs.Add(1) }

func sameRecord(a, b store.Record) bool {
	return a.TS == b.TS && a.Tombstone == b.Tombstone && string(a.Value) == string(b.Value)
}

var errNotYet = errors.New("not yet")

// putKEverywhere writes k=v through co at ack=3 of 3, so that every replica holds it, or fails
// the test: the start of the tests that then take replicas down or make them hang.
func putKEverywhere(t *testing.T, ctx context.Context, co *Coordinator) {
	t.Helper()
	if _, err := co.Put(ctx, []byte("k"), []byte("v"), 3, 3); err != nil {
		t.Fatalf("Put: %v", err)
	}
}
