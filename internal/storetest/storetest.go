// Package storetest opens real badger stores for tests and fills them.
package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"ringkv/node/ring"
	"ringkv/node/store"
)

// Open opens a real badger store in a temp dir with small caches, closed at the test's end
// unless the test closed it first.
func Open(tb testing.TB) *store.Store {
	tb.Helper()
	cfg := store.DefaultConfig()
	cfg.Dir = tb.TempDir()
	cfg.ValueLogGCInterval = 0
	cfg.Badger = func(o badger.Options) badger.Options {
		return o.WithNumMemtables(2).WithBlockCacheSize(8 << 20).WithIndexCacheSize(4 << 20)
	}
	s, err := store.Open(cfg)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			tb.Errorf("close store: %v", err)
		}
	})
	return s
}

// Fill writes n records of size value bytes with keys "k%07d" and returns their bytes
// (key + value).
func Fill(tb testing.TB, s *store.Store, n, size int) uint64 {
	tb.Helper()
	value := make([]byte, size)
	var total uint64
	var batch []store.Entry
	for i := range n {
		key := fmt.Appendf(nil, "k%07d", i)
		batch = append(batch, store.Entry{Token: ring.Token(key), Key: key, Record: store.Record{TS: uint64(i + 1), Value: value}})
		total += uint64(len(key) + size)
	}
	if _, err := s.ApplyBatch(batch); err != nil {
		tb.Fatalf("fill: %v", err)
	}
	return total
}
