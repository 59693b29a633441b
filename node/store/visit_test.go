package store

import (
	"context"
	"fmt"
	"testing"
)

// TestVisitMatchesScan: Visit walks the same records in the same order as Scan.
func TestVisitMatchesScan(t *testing.T) {
	s := newStore(t)
	for i := range 200 {
		rec := Record{TS: uint64(i + 1), Value: fmt.Appendf(nil, "v%d", i)}
		if i%7 == 0 {
			rec = Record{TS: uint64(i + 1), Tombstone: true}
		}
		if _, err := s.Apply(uint64(i)<<56, fmt.Appendf(nil, "k%d", i), rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range [][2]uint64{{0, 0}, {10 << 56, 100 << 56}, {150 << 56, 20 << 56}} {
		var scanned, visited []string
		if err := s.Scan(context.Background(), r[0], r[1], nil, func(_, key []byte, rec Record) error {
			scanned = append(scanned, fmt.Sprintf("%s %d %v %s", key, rec.TS, rec.Tombstone, rec.Value))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Visit(context.Background(), r[0], r[1], func(_ uint64, key []byte, rec Record) error {
			visited = append(visited, fmt.Sprintf("%s %d %v %s", key, rec.TS, rec.Tombstone, rec.Value))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(scanned) != fmt.Sprint(visited) || len(visited) == 0 {
			t.Errorf("(%x, %x]: visited %d records, scanned %d; want the same", r[0], r[1], len(visited), len(scanned))
		}
	}
}

// TestPurgeTombstones: only tombstones below the cutoff in the range go; values and newer
// tombstones stay; the key count follows.
func TestPurgeTombstones(t *testing.T) {
	s := newStore(t)
	put := func(tok uint64, k string, rec Record) {
		t.Helper()
		if _, err := s.Apply(tok, []byte(k), rec); err != nil {
			t.Fatal(err)
		}
	}
	put(10, "old-tomb", Record{TS: 5, Tombstone: true})
	put(11, "new-tomb", Record{TS: 50, Tombstone: true})
	put(12, "old-value", Record{TS: 5, Value: []byte("v")})
	put(1000, "outside", Record{TS: 5, Tombstone: true})
	n, err := s.PurgeTombstones(context.Background(), 0, 100, 20)
	if err != nil || n != 1 {
		t.Fatalf("purged %d (err %v), want 1", n, err)
	}
	for _, c := range []struct {
		tok  uint64
		key  string
		want bool
	}{{10, "old-tomb", false}, {11, "new-tomb", true}, {12, "old-value", true}, {1000, "outside", true}} {
		if _, found, _ := s.Get(c.tok, []byte(c.key)); found != c.want {
			t.Errorf("%s: found %v, want %v", c.key, found, c.want)
		}
	}
	if got := s.KeyCount(); got != 3 {
		t.Errorf("key count %d, want 3", got)
	}
}

// TestPurgeKeepsNewerWrite: a write that lands between the purge finding a tombstone and
// deleting it survives.
func TestPurgeKeepsNewerWrite(t *testing.T) {
	s := newStore(t)
	if _, err := s.Apply(10, []byte("k"), Record{TS: 5, Tombstone: true}); err != nil {
		t.Fatal(err)
	}
	// The purge found the tombstone (TS 5); a newer write lands before it deletes.
	if _, err := s.Apply(10, []byte("k"), Record{TS: 6, Value: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	s.dbMu.RLock()
	ok, err := s.purgeOne(StoreKey(10, []byte("k")), 5)
	s.dbMu.RUnlock()
	if err != nil || ok {
		t.Fatalf("purgeOne: %v (err %v), want nothing deleted", ok, err)
	}
	if rec, found, _ := s.Get(10, []byte("k")); !found || string(rec.Value) != "new" {
		t.Errorf("after purge: %+v found %v, want the newer write", rec, found)
	}
}
