package store

import (
	"context"
	"sync"
	"testing"
)

// FuzzStoreModel drives random interleavings of client writes and deletes (Apply, ApplyAsync
// as the coordinator's own write uses it, and ApplyMany as the replica service's batches do), repair and ring streams (ApplyBatch)
// and tombstone purges (PurgeTombstones) against a model: a map holding, per key, the newest
// record written (last-write-wins by timestamp, a tombstone winning a tie, then the greater
// value), less the tombstones purged. Writes of one step run concurrently, through all three
// paths at once; a purge runs alone between steps. After every step each key must read as
// the model says.
//
// Input: a sequence of steps. A step's first byte h: h%5 == 0 is a purge of the tombstones
// older than the next byte; else the step is h%5 writes of 3 bytes each (path and key and
// tombstone bit, timestamp, value).
func FuzzStoreModel(f *testing.F) {
	f.Add([]byte{3, 0x00, 5, 1, 0x04, 7, 2, 0x81, 6, 0})
	f.Add([]byte{2, 0x80, 9, 0, 0x01, 9, 1, 0, 10, 2, 0x82, 20, 0, 0x02, 3, 3})
	f.Add([]byte{1, 0x00, 4, 4, 1, 0x80, 4, 0, 5, 0, 1, 0x01, 2, 2})
	f.Add([]byte{4, 0x85, 9, 0, 0x05, 9, 1, 0x45, 9, 2, 0xc5, 9, 0, 5, 10, 3, 0x05, 1, 1, 0x06, 2, 2, 0x46, 3, 3})
	f.Add([]byte{3, 0x80, 1, 0, 0x81, 2, 0, 0x82, 3, 0, 5, 255, 2, 0x00, 1, 7, 0x01, 1, 8})
	dir := f.TempDir()
	var (
		once sync.Once
		s    *Store
		run  uint64
	)
	f.Fuzz(func(t *testing.T, in []byte) {
		once.Do(func() {
			// One store for every input (opening badger per input would be most of the
			// time): each input writes its own token range.
			var err error
			if s, err = Open(testConfig(dir)); err != nil {
				t.Fatalf("Open: %v", err)
			}
		})
		run++
		base := run * 1000 // this input's tokens are base+1 .. base+keys
		const keys = 6
		key := func(k int) []byte { return []byte{'k', byte('0' + k)} }
		model := map[int]Record{}
		for len(in) > 0 {
			h := in[0]
			in = in[1:]
			if h%5 == 0 {
				if len(in) == 0 {
					return
				}
				before := uint64(in[0])
				in = in[1:]
				if _, err := s.PurgeTombstones(context.Background(), base, base+1000, before); err != nil {
					t.Fatalf("PurgeTombstones: %v", err)
				}
				for k, r := range model {
					if r.Tombstone && r.TS < before {
						delete(model, k)
					}
				}
			} else {
				var single, async, many, batch []Entry
				for range int(h % 5) {
					if len(in) < 3 {
						break
					}
					b0, ts, v := in[0], uint64(in[1]), in[2]
					in = in[3:]
					k := int(b0>>2) % keys
					rec := Record{TS: ts, Value: []byte{v}}
					if b0&0x80 != 0 {
						rec = Record{TS: ts, Tombstone: true}
					}
					e := Entry{Token: base + 1 + uint64(k), Key: key(k), Record: rec}
					switch b0 % 4 {
					case 0:
						single = append(single, e)
					case 3:
						async = append(async, e)
					case 1:
						many = append(many, e)
					case 2:
						batch = append(batch, e)
					}
					if cur, ok := model[k]; !ok || rec.Newer(cur) {
						model[k] = rec
					}
				}
				applyAll(t, s, single, async, many, batch)
			}
			for k := range keys {
				got, found, err := s.Get(base+1+uint64(k), key(k))
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				want, ok := model[k]
				if found != ok || (ok && !sameRecord(got, want)) {
					t.Fatalf("key %d: got %+v (found %v), want %+v (present %v)", k, got, found, want, ok)
				}
			}
		}
	})
	f.Cleanup(func() {
		if s != nil {
			if err := s.Close(); err != nil {
				f.Errorf("Close: %v", err)
			}
		}
	})
}

// applyAll writes its entries through the store's four write paths at once: each of single
// by its own Apply, each of async by ApplyAsync, many by one ApplyMany and batch by one
// ApplyBatch; it returns when all have.
func applyAll(t *testing.T, s *Store, single, async, many, batch []Entry) {
	t.Helper()
	var wg sync.WaitGroup
	for _, e := range single {
		wg.Go(func() {
			if _, err := s.Apply(e.Token, e.Key, e.Record); err != nil {
				t.Errorf("Apply: %v", err)
			}
		})
	}
	for _, e := range async {
		wg.Add(1)
		s.ApplyAsync(e.Token, e.Key, e.Record, func(_ bool, err error) {
			if err != nil {
				t.Errorf("ApplyAsync: %v", err)
			}
			wg.Done()
		})
	}
	if len(many) > 0 {
		wg.Go(func() {
			out := make([]Outcome, len(many))
			s.ApplyMany(many, out)
			for _, o := range out {
				if o.Err != nil {
					t.Errorf("ApplyMany: %v", o.Err)
				}
			}
		})
	}
	if len(batch) > 0 {
		wg.Go(func() {
			if _, err := s.ApplyBatch(batch); err != nil {
				t.Errorf("ApplyBatch: %v", err)
			}
		})
	}
	wg.Wait()
}
