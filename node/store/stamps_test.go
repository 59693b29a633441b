package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestStampsBudget: a stripe never holds more than its share of the budget, and what it
// holds is the last stamp put for each key it still remembers.
func TestStampsBudget(t *testing.T) {
	var c stamps
	c.init(stripes * 200) // 200 bytes a stripe: three keys of 10 bytes and more
	last := map[string]stamp{}
	for i := range 1000 {
		sk := fmt.Appendf(nil, "key%07d", i%40)
		st := stamp{ts: uint64(i), tomb: i%3 == 0}
		c.put(7, sk, st)
		last[string(sk)] = st
		sh := &c.shards[7]
		if sh.bytes > c.budget {
			t.Fatalf("after %d puts: %d bytes held, budget %d", i+1, sh.bytes, c.budget)
		}
		sum := 0
		for k, got := range sh.m {
			sum += len(k) + stampOverhead
			if got != last[k] {
				t.Fatalf("key %s: remembered %+v, last put %+v", k, got, last[k])
			}
		}
		if sum != sh.bytes {
			t.Fatalf("bytes counted %d, held %d", sh.bytes, sum)
		}
	}
	if got, ok := c.get(7, []byte("key0000039")); !ok || got != last["key0000039"] {
		t.Fatalf("the key put last: got %+v (%v), want %+v", got, ok, last["key0000039"])
	}
	c.drop(7, []byte("key0000039"))
	if _, ok := c.get(7, []byte("key0000039")); ok {
		t.Fatal("a dropped key is still remembered")
	}
	c.put(7, make([]byte, 500), stamp{ts: 1}) // over a stripe's whole budget: not kept
	if _, ok := c.get(7, make([]byte, 500)); ok {
		t.Fatal("a key over the budget was remembered")
	}
	var off stamps
	off.init(0)
	off.put(1, []byte("k"), stamp{ts: 1})
	if _, ok := off.get(1, []byte("k")); ok {
		t.Fatal("a cache with no budget remembered a key")
	}
}

// TestStampsAgainstModel drives random interleavings of every write path (Apply,
// ApplyAsync, ApplyMany, ApplyBatch), tombstone purges and DeleteRange over 1,000 keys on a
// store whose stamp cache holds about one key per stripe, so that most writes find their
// key forgotten, evicted or remembered in turn; after every step each key must read as a
// model of last-write-wins says. A second store with the cache off runs the same steps and
// must agree: the cache decides nothing badger would not.
func TestStampsAgainstModel(t *testing.T) {
	const keys = 1000
	small := testConfig(t.TempDir())
	small.StampBytes = stripes * 64 // one short key a stripe
	off := testConfig(t.TempDir())
	off.StampBytes = 0
	stores := []*Store{mustOpen(t, small), mustOpen(t, off)}
	rnd := rand.New(rand.NewPCG(7, 11))
	key := func(k int) []byte { return fmt.Appendf(nil, "k%d", k) }
	token := func(k int) uint64 { return uint64(k)*1000 + 1 }
	model := map[int]Record{}
	steps := 200
	if testing.Short() {
		steps = 100
	}
	for step := range steps {
		switch op := rnd.IntN(20); {
		case op == 0: // purge the tombstones older than a timestamp
			before := uint64(rnd.IntN(step*10 + 10))
			for _, s := range stores {
				if _, err := s.PurgeTombstones(context.Background(), 0, token(keys), before); err != nil {
					t.Fatalf("PurgeTombstones: %v", err)
				}
			}
			for k, r := range model {
				if r.Tombstone && r.TS < before {
					delete(model, k)
				}
			}
		case op == 1: // a range moved away
			lo := rnd.IntN(keys)
			hi := min(keys, lo+1+rnd.IntN(50)) // (a, a] would be the whole ring
			for _, s := range stores {
				if err := s.DeleteRange(token(lo)-1, token(hi)-1); err != nil {
					t.Fatalf("DeleteRange: %v", err)
				}
			}
			for k := lo; k < hi; k++ {
				delete(model, k)
			}
		default: // writes through all four paths at once
			var single, async, many, batch []Entry
			for range 1 + rnd.IntN(64) {
				k := rnd.IntN(keys)
				// Timestamps around the step's, so that old and new writes race; few values,
				// so that equal timestamps come down to the values.
				rec := Record{TS: uint64(step*10 + rnd.IntN(40)), Value: []byte{byte(rnd.IntN(3))}}
				if rnd.IntN(4) == 0 {
					rec = Record{TS: rec.TS, Tombstone: true}
				}
				e := Entry{Token: token(k), Key: key(k), Record: rec}
				switch rnd.IntN(4) {
				case 0:
					single = append(single, e)
				case 1:
					async = append(async, e)
				case 2:
					many = append(many, e)
				case 3:
					batch = append(batch, e)
				}
				if cur, ok := model[k]; !ok || rec.Newer(cur) {
					model[k] = rec
				}
			}
			for _, s := range stores {
				applyAll(t, s, single, async, many, batch)
			}
		}
		for k := range keys {
			want, present := model[k]
			for i, s := range stores {
				got, found, err := s.Get(token(k), key(k))
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				if found != present || (present && !sameRecord(got, want)) {
					t.Fatalf("step %d, store %d (0: small cache, 1: none), key %d: got %+v (found %v), want %+v (present %v)",
						step, i, k, got, found, want, present)
				}
			}
		}
	}
	if n := stores[0].KeyCount(); n != int64(len(model)) {
		t.Fatalf("KeyCount %d with the cache, want %d", n, len(model))
	}
}

func mustOpen(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
