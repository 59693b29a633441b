package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"ringkv/internal/eventually"
	"ringkv/node/ring"
	"ringkv/node/store"
)

// damagedStore opens a store that lost its MANIFEST and was opened with Recover: every
// token is marked damaged until repaired.
func damagedStore(t testing.TB) *store.Store {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.ValueLogGCInterval = 0
	cfg.Badger = func(o badger.Options) badger.Options {
		return o.WithMemTableSize(8 << 20).WithNumMemtables(2).WithBlockCacheSize(1 << 20)
	}
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ring.Token([]byte("x")), []byte("x"), store.Record{TS: 1, Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(cfg.Dir, "MANIFEST")); err != nil {
		t.Fatal(err)
	}
	cfg.Recover = true
	if st, err = store.Open(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if !st.Damaged(0) {
		t.Fatalf("store opened with Recover after its MANIFEST was lost: got no damaged marks")
	}
	return st
}

// TestDamagedReplicaDoesNotCountForRead: a replica whose store marks the key's range damaged
// (it may miss acknowledged writes) refuses reads with ErrRangeDamaged, so a quorum read
// through it or through a peer is answered by replicas whose copies are whole; its breaker
// stays closed, writes still reach it, and read reconciliation gives it the newest version. Without
// the rule, a read with ack=2 through the damaged node takes its empty answer and misses the
// value for the keys whose other answer came from the replica that missed the write.
func TestDamagedReplicaDoesNotCountForRead(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	c.nodes["n0"] = newFaulty(damagedStore(t))
	cur := c.view.Load().Current
	// Each key acknowledged by n0 (before its damage) and one peer: written now to the peer
	// that comes second in ring order, so a read that takes n0's answer and the first peer's
	// misses it.
	const n = 40
	want := map[string]store.Record{}
	for i := range n {
		key := fmt.Sprintf("k%02d", i)
		var peers []string
		for _, m := range cur.Lookup(ring.Token([]byte(key)), 3) {
			if m.ID != "n0" {
				peers = append(peers, m.ID)
			}
		}
		rec := store.Record{TS: uint64(100 + i), Value: []byte("v" + key)}
		c.nodes[peers[len(peers)-1]].put(t, key, rec)
		want[key] = rec
	}
	if _, _, err := c.nodes["n0"].Read(ctx, []byte("k00")); !errors.Is(err, ErrRangeDamaged) {
		t.Fatalf("Read on the damaged replica: got %v, want ErrRangeDamaged", err)
	}
	for _, self := range []string{"n0", "n1"} {
		co := c.coordinator(t, self, Config{ReplicaTimeout: 2 * time.Second}, nil)
		for key, rec := range want {
			got, found, err := co.Get(ctx, []byte(key), 2, 3)
			if err != nil || !found || !sameRecord(got, rec) {
				t.Fatalf("Get(%s) with ack=2 through %s: got %+v found=%v err=%v, want %+v", key, self, got, found, err, rec)
			}
		}
		for _, b := range co.Breakers() {
			if b.Peer == "n0" && b.State != BreakerClosed {
				t.Fatalf("through %s: n0's breaker %s after its refusals, want closed", self, b.State)
			}
		}
	}
	// Read reconciliation wrote the newest versions to the damaged replica's store.
	eventually.Succeeds(t, 10*time.Second, func() error {
		for key, rec := range want {
			if got, ok := c.nodes["n0"].has(t, key); !ok || !sameRecord(got, rec) {
				return fmt.Errorf("n0 holds %+v (found %v) for %s, want %+v", got, ok, key, rec)
			}
		}
		return nil
	})
	// Once the range is repaired, the replica answers again.
	if err := c.nodes["n0"].st.ClearDamaged(0, 0, true); err != nil {
		t.Fatal(err)
	}
	if got, found, err := c.nodes["n0"].Read(ctx, []byte("k00")); err != nil || !found || !sameRecord(got, want["k00"]) {
		t.Fatalf("Read on the repaired replica: got %+v found=%v err=%v, want %+v", got, found, err, want["k00"])
	}
}
