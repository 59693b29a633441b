package store

import (
	"bytes"
	"testing"

	"ringkv/internal/damagetest"
)

// TestMovePointsPersist: a saved point is there after a reopen, the records before it too;
// dropping forgets it for good; a store opened damaged forgets its points (they may name
// records it lost).
func TestMovePointsPersist(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, testConfig(dir))
	if _, err := s.ApplyBatch([]Entry{{Token: 10, Key: []byte("a"), Record: val(1, "x")}, {Token: 20, Key: []byte("b"), Record: val(1, "y")}}); err != nil {
		t.Fatal(err)
	}
	want := MovePoint{Change: 7, Index: 3, Start: 5, End: 90, Source: "n1", After: StoreKey(20, []byte("b")), Keys: 2, Bytes: 4}
	if err := s.SaveMovePoint(want); err != nil {
		t.Fatalf("SaveMovePoint: %v", err)
	}
	if err := s.SaveMovePoint(MovePoint{Change: 6, Index: 0, After: []byte("old")}); err != nil {
		t.Fatalf("SaveMovePoint: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, testConfig(dir))
	got, ok := s.MovePoint(7, 3)
	if !ok || got.Change != want.Change || got.Start != want.Start || got.End != want.End || !bytes.Equal(got.After, want.After) || got.Bytes != want.Bytes || got.Source != want.Source {
		t.Fatalf("after reopen: got %+v (found %v), want %+v", got, ok, want)
	}
	if _, found, err := s.Get(20, []byte("b")); err != nil || !found {
		t.Fatalf("record before the point after reopen: found %v, err %v", found, err)
	}
	// Keep change 7 only: change 6's point goes.
	if err := s.DropMovePoints(7, -1); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.MovePoint(6, 0); ok {
		t.Fatalf("change 6's point after dropping every change but 7: still there")
	}
	if _, ok := s.MovePoint(7, 3); !ok {
		t.Fatalf("change 7's point after dropping every change but 7: gone")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	damagetest.RemoveManifest(t, dir)
	cfg := testConfig(dir)
	cfg.Recover = true
	s = openTest(t, cfg)
	if s.Damage() == "" {
		t.Fatalf("store without its MANIFEST opened whole, want damage")
	}
	if got, ok := s.MovePoint(7, 3); ok {
		t.Fatalf("damaged store: got point %+v, want none (the records before it may be gone)", got)
	}
}
