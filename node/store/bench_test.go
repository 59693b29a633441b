package store

import (
	"fmt"
	"sync/atomic"
	"testing"
)

const benchValueSize = 100

// benchStore opens a store with the default config in b.TempDir().
func benchStore(b *testing.B) *Store {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Dir = b.TempDir()
	return openTest(b, cfg)
}

func benchKey(i int) (uint64, []byte) {
	return uint64(i) * 0x9e3779b97f4a7c15, fmt.Appendf(nil, "key%08d", i)
}

func BenchmarkPut(b *testing.B) {
	s := benchStore(b)
	value := make([]byte, benchValueSize)
	b.SetBytes(benchValueSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		token, key := benchKey(i)
		if _, err := s.Apply(token, key, Record{TS: uint64(i + 1), Value: value}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkGet(b *testing.B) {
	s := benchStore(b)
	const keys = 100_000
	value := make([]byte, benchValueSize)
	for i := range keys {
		token, key := benchKey(i)
		if _, err := s.Apply(token, key, Record{TS: 1, Value: value}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(benchValueSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		token, key := benchKey(i * 7919 % keys)
		if _, found, err := s.Get(token, key); err != nil || !found {
			b.Fatalf("Get: found=%v err=%v", found, err)
		}
		i++
	}
}

// BenchmarkApplyParallel applies increasing versions to 10,000 keys from
// GOMAXPROCS goroutines: a mix of new keys, overwrites and, once the
// goroutines interleave, stale versions that are rejected.
func BenchmarkApplyParallel(b *testing.B) {
	s := benchStore(b)
	const keys = 10_000
	value := make([]byte, benchValueSize)
	var clock, next atomic.Uint64
	b.SetBytes(benchValueSize)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			token, key := benchKey(int(next.Add(1) % keys))
			if _, err := s.Apply(token, key, Record{TS: clock.Add(1), Value: value}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkApply runs Apply of increasing versions over 10,000 keys, from one goroutine and
// from 16 per GOMAXPROCS (a node's replica handlers), with and without SyncWrites. It reports
// syncs/op: how many fsyncs (OnSync calls) each Apply cost, so 1/syncs-per-op is how many
// Applies a group commit gathered on average.
func BenchmarkApply(b *testing.B) {
	for _, sync := range []bool{false, true} {
		for _, parallel := range []bool{false, true} {
			name := fmt.Sprintf("sync=%v/parallel=%v", sync, parallel)
			b.Run(name, func(b *testing.B) {
				var syncs atomic.Int64
				cfg := DefaultConfig()
				cfg.Dir = b.TempDir()
				cfg.SyncWrites = sync
				cfg.OnSync = func(int) { syncs.Add(1) }
				s := openTest(b, cfg)
				const keys = 10_000
				value := make([]byte, benchValueSize)
				var clock, next atomic.Uint64
				apply := func() error {
					token, key := benchKey(int(next.Add(1) % keys))
					_, err := s.Apply(token, key, Record{TS: clock.Add(1), Value: value})
					return err
				}
				b.SetBytes(benchValueSize)
				b.ReportAllocs()
				b.ResetTimer()
				if parallel {
					b.SetParallelism(16)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := apply(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				} else {
					for range b.N {
						if err := apply(); err != nil {
							b.Fatal(err)
						}
					}
				}
				if sync {
					b.ReportMetric(float64(syncs.Load())/float64(b.N), "syncs/op")
				}
			})
		}
	}
}
