package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"ringkv/internal/eventually"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// badger's and glog's background workers that outlive a closed DB in the same process.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

// testRing builds a ring of the given members with vnodes tokens each.
func testRing(t *testing.T, epoch uint64, replicas, vnodes int, ids ...string) *ring.Ring {
	t.Helper()
	toks := ring.FounderTokens(ids, vnodes)
	var ms []ring.Member
	for _, id := range ids {
		ms = append(ms, ring.Member{ID: id, Addr: id + ":1", State: ring.StateUp, Tokens: toks[id]})
	}
	r, err := ring.New(epoch, replicas, ms)
	if err != nil {
		t.Fatalf("ring.New: %v", err)
	}
	return r
}

// ringBox is a swappable ring, as the node keeps it.
type ringBox struct {
	mu sync.Mutex
	r  *ring.Ring
}

func (b *ringBox) get() *ring.Ring  { b.mu.Lock(); defer b.mu.Unlock(); return b.r }
func (b *ringBox) set(r *ring.Ring) { b.mu.Lock(); defer b.mu.Unlock(); b.r = r }
func newBox(r *ring.Ring) *ringBox  { return &ringBox{r: r} }
func openStore(t *testing.T) *store.Store {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.Dir = t.TempDir()
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// expectedByRange counts keys per range end token by a linear scan with Range.Contains
// (independent of the Registry's binary search).
func expectedByRange(rg *ring.Ring, keys [][]byte) map[uint64]uint64 {
	want := map[uint64]uint64{}
	for _, k := range keys {
		tok := ring.Token(k)
		for _, rr := range rg.Ranges() {
			if rr.Contains(tok) {
				want[rr.End]++
				break
			}
		}
	}
	return want
}

func TestVnodeAttribution(t *testing.T) {
	rg := testRing(t, 1, 3, 16, "n1", "n2", "n3", "n4")
	box := newBox(rg)
	st := openStore(t)
	reg := New(Config{ID: "n1", Ring: box.get, Store: st})
	local := replica.NewLocal(st, reg)
	ctx := context.Background()

	const n = 2000
	var keys, readKeys [][]byte
	for i := range n {
		k := fmt.Appendf(nil, "user:%05d", i)
		keys = append(keys, k)
		if i%4 == 0 {
			readKeys = append(readKeys, k)
		}
	}
	for i, k := range keys {
		if _, err := local.Write(ctx, k, store.Record{TS: uint64(i + 1), Value: []byte("v")}, ring.ViewID{}); err != nil {
			t.Fatalf("write %s: %v", k, err)
		}
	}
	for _, k := range readKeys {
		if _, _, err := local.Read(ctx, k); err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
	}
	reg.refreshCounts(ctx, reg.table(), true)

	wantWrites, wantReads := expectedByRange(rg, keys), expectedByRange(rg, readKeys)
	ns := reg.Snapshot(true)
	got := map[uint64][3]uint64{}
	for _, v := range ns.Vnodes {
		got[v.Token] = [3]uint64{v.WritesTotal, v.ReadsTotal, v.Keys}
	}
	for _, rr := range rg.Ranges() {
		want := [3]uint64{wantWrites[rr.End], wantReads[rr.End], wantWrites[rr.End]}
		if want == ([3]uint64{}) {
			continue
		}
		if g := got[rr.End]; g != want {
			t.Errorf("vnode %s: got writes, reads, keys %v, want %v", rr, g, want)
		}
	}
	if ns.Keys != n {
		t.Errorf("got keys %d, want %d", ns.Keys, n)
	}
	var mine int
	for _, rr := range rg.Ranges() {
		for _, m := range rg.Lookup(rr.End, 3) {
			if m.ID == "n1" {
				mine++
			}
		}
	}
	if len(ns.Vnodes) < mine {
		t.Errorf("got %d vnodes in snapshot, want at least the %d n1 replicates", len(ns.Vnodes), mine)
	}

	// The ring changes: a fifth member splits some ranges. Counters of ranges whose end token
	// survives are carried over; new traffic goes to the new ranges.
	next, err := rg.WithMember(ring.Member{ID: "n5", Addr: "n5:1", State: ring.StateUp}, 16)
	if err != nil {
		t.Fatalf("WithMember: %v", err)
	}
	box.set(next)
	for _, k := range keys {
		reg.ObserveVnode(ring.Token(k), true, 1)
	}
	wantNext := expectedByRange(next, keys)
	got = map[uint64][3]uint64{}
	for _, v := range reg.Snapshot(true).Vnodes {
		got[v.Token] = [3]uint64{v.WritesTotal}
	}
	for _, rr := range next.Ranges() {
		want := wantNext[rr.End] + wantWrites[rr.End] // carried if the end token existed before
		if g := got[rr.End][0]; g != want {
			t.Errorf("after ring change, vnode %s: got writes %d, want %d", rr, g, want)
		}
	}
}

func TestObserveOp(t *testing.T) {
	reg := New(Config{ID: "n1"})
	errTimeout := fmt.Errorf("read: %w", context.DeadlineExceeded)
	for i := range 100 {
		var err error
		switch {
		case i%10 == 0:
			err = errTimeout
		case i%25 == 1:
			err = fmt.Errorf("quorum: %w", replica.ErrNotEnoughReplicas)
		}
		reg.ObserveOp(replica.OpGet, replica.RoleCoordinator, time.Duration(i+1)*time.Millisecond, err)
	}
	reg.ObserveOp(replica.OpPut, replica.RoleReplica, 3*time.Millisecond, errors.New("disk on fire"))
	reg.ObserveOp(replica.NumOps, replica.RoleCoordinator, time.Millisecond, nil) // unknown: ignored
	reg.Reconciled()
	reg.Reconciled()
	reg.Hint()

	ns := reg.Snapshot(false)
	if len(ns.Ops) != numSlots {
		t.Fatalf("got %d op stats, want %d", len(ns.Ops), numSlots)
	}
	byKey := map[string]int{}
	for i, o := range ns.Ops {
		byKey[o.Op.String()+"/"+o.Role.String()] = i
	}
	get := ns.Ops[byKey["OP_GET/OP_ROLE_COORDINATOR"]]
	tests := []struct {
		name      string
		got, want float64
		tolerance float64
	}{
		{"get count", float64(get.Count), 100, 0},
		{"get errors", float64(get.Errors), 14, 0},
		{"get p50 ms", get.P50Ms, 50, 1},
		{"get p99 ms", get.P99Ms, 99, 1},
		{"get max ms", get.MaxMs, 100, 1},
		{"node p99 ms", ns.P99Ms, 99, 1},
		{"put/replica count", float64(ns.Ops[byKey["OP_PUT/OP_ROLE_REPLICA"]].Count), 1, 0},
		{"errors timeout", float64(ns.Errors["timeout"]), 10, 0},
		{"errors unavailable", float64(ns.Errors["unavailable"]), 4, 0},
		{"errors internal", float64(ns.Errors["internal"]), 1, 0},
		{"read reconciliations", float64(ns.ReadReconciliations), 2, 0},
		{"hints", float64(ns.Hints), 1, 0},
	}
	for _, tt := range tests {
		if math.Abs(tt.got-tt.want) > tt.tolerance {
			t.Errorf("%s: got %v, want %v (±%v)", tt.name, tt.got, tt.want, tt.tolerance)
		}
	}
	if ns.Goroutines == 0 || ns.HeapBytes == 0 {
		t.Errorf("got goroutines %d heap %d, want both > 0", ns.Goroutines, ns.HeapBytes)
	}
}

func TestRatesDecay(t *testing.T) {
	reg := New(Config{ID: "n1"})
	for range 100 {
		reg.ObserveOp(replica.OpGet, replica.RoleCoordinator, time.Millisecond, nil)
	}
	reg.tick(time.Second)
	o := reg.Snapshot(false).Ops[0]
	want1s, want1m := 100*(1-math.Exp(-1)), 100*(1-math.Exp(-1.0/60))
	if math.Abs(o.Rate_1S-want1s) > 1e-9 || math.Abs(o.Rate_1M-want1m) > 1e-9 {
		t.Errorf("after one tick: got rates %v, %v, want %v, %v", o.Rate_1S, o.Rate_1M, want1s, want1m)
	}
	for range 30 {
		reg.tick(time.Second)
	}
	o = reg.Snapshot(false).Ops[0]
	if o.Rate_1S > 1e-9 || o.Rate_1M <= 0 {
		t.Errorf("after 30 idle ticks: got rates %v, %v, want ~0 and > 0", o.Rate_1S, o.Rate_1M)
	}
	// The latency window forgets after two rotations.
	reg.rotate()
	if o := reg.Snapshot(false).Ops[0]; o.P99Ms == 0 {
		t.Errorf("after one rotation: got p99 0, want the old half still counted")
	}
	reg.rotate()
	if o := reg.Snapshot(false).Ops[0]; o.P99Ms != 0 {
		t.Errorf("after two rotations: got p99 %v, want 0", o.P99Ms)
	}
}

func TestRun(t *testing.T) {
	rg := testRing(t, 7, 1, 4, "n1")
	st := openStore(t)
	reg := New(Config{ID: "n1", Ring: func() *ring.Ring { return rg }, Store: st, Tick: 5 * time.Millisecond})
	local := replica.NewLocal(st, reg)
	for i := range 10 {
		if _, err := local.Write(context.Background(), fmt.Appendf(nil, "k%d", i), store.Record{TS: 1}, ring.ViewID{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- reg.Run(ctx) }()

	eventually.Succeeds(t, 10*time.Second, func() error {
		if ns := reg.Snapshot(true); ns.Keys != 10 || ns.Epoch != 7 {
			return fmt.Errorf("snapshot: %d keys at epoch %d, want 10 at 7", ns.Keys, ns.Epoch)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func BenchmarkObserveOp(b *testing.B) {
	reg := New(Config{ID: "n1"})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		reg.ObserveOp(replica.OpGet, replica.RoleCoordinator, time.Duration(i%5000)*time.Microsecond, nil)
	}
}

func BenchmarkObserveOpParallel(b *testing.B) {
	reg := New(Config{ID: "n1"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			reg.ObserveOp(replica.OpPut, replica.RoleReplica, time.Duration(i%5000)*time.Microsecond, nil)
		}
	})
}

func BenchmarkObserveVnode(b *testing.B) {
	toks := ring.FounderTokens([]string{"a", "b", "c"}, 256)
	var ms []ring.Member
	for id, ts := range toks {
		ms = append(ms, ring.Member{ID: id, Tokens: ts})
	}
	rg, err := ring.New(1, 3, ms)
	if err != nil {
		b.Fatal(err)
	}
	reg := New(Config{ID: "a", Ring: func() *ring.Ring { return rg }})
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		reg.ObserveVnode(i*0x9E3779B97F4A7C15, i&1 == 0, 100)
	}
}
