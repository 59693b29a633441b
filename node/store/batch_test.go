package store

import (
	"fmt"
	"sync"
	"testing"
)

func TestApplyBatch(t *testing.T) {
	tests := []struct {
		name        string
		stored      []Record // stored before the batch, one per key ("a", "b", ...); TS 0 = none
		batch       []Record // one per key in the same order, unless keys says otherwise
		keys        []string // keys of batch entries; nil = "a", "b", ... in order
		wantApplied int
		want        []Record // what each key holds afterwards; TS 0 = absent
		wantKeys    int64
	}{
		{
			name:        "new keys",
			batch:       []Record{val(1, "x"), val(2, "y")},
			wantApplied: 2,
			want:        []Record{val(1, "x"), val(2, "y")},
			wantKeys:    2,
		},
		{
			name:        "older and equal versions lose, newer win",
			stored:      []Record{val(5, "old"), val(5, "same"), val(5, "z")},
			batch:       []Record{val(4, "older"), val(5, "same"), val(6, "newer")},
			wantApplied: 1,
			want:        []Record{val(5, "old"), val(5, "same"), val(6, "newer")},
			wantKeys:    3,
		},
		{
			name:        "tombstone wins a tie",
			stored:      []Record{val(7, "v")},
			batch:       []Record{tomb(7)},
			wantApplied: 1,
			want:        []Record{tomb(7)},
			wantKeys:    1,
		},
		{
			name:        "a key twice: the newer of the two",
			keys:        []string{"a", "a", "a"},
			batch:       []Record{val(3, "three"), val(2, "two"), val(4, "four")},
			wantApplied: 2,
			want:        []Record{val(4, "four")},
			wantKeys:    1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			name := func(i int) []byte { return []byte{byte('a' + i)} }
			for i, r := range tt.stored {
				if _, err := s.Apply(uint64(i), name(i), r); err != nil {
					t.Fatalf("Apply: %v", err)
				}
			}
			var batch []Entry
			for i, r := range tt.batch {
				k := name(i)
				if tt.keys != nil {
					k = []byte(tt.keys[i])
				}
				batch = append(batch, Entry{Token: uint64(k[0] - 'a'), Key: k, Record: r})
			}
			got, err := s.ApplyBatch(batch)
			if err != nil {
				t.Fatalf("ApplyBatch: %v", err)
			}
			if got != tt.wantApplied {
				t.Errorf("got %d applied, want %d", got, tt.wantApplied)
			}
			for i, w := range tt.want {
				rec, found, err := s.Get(uint64(i), name(i))
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				if !found || rec.TS != w.TS || rec.Tombstone != w.Tombstone || string(rec.Value) != string(w.Value) {
					t.Errorf("key %s: got %+v (found %v), want %+v", name(i), rec, found, w)
				}
			}
			if got := s.KeyCount(); got != tt.wantKeys {
				t.Errorf("got key count %d, want %d", got, tt.wantKeys)
			}
		})
	}
}

// Batches larger than one transaction group, racing with Apply on the same keys, end with
// the newest version of every key.
func TestApplyBatchConcurrentEndsWithMax(t *testing.T) {
	s := newStore(t)
	const keys, writers = 500, 4
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var batch []Entry
			for i := range keys {
				k := fmt.Appendf(nil, "k%04d", i)
				rec := val(uint64(10*i+w), fmt.Sprintf("w%d", w))
				if w%2 == 0 {
					if _, err := s.Apply(uint64(i), k, rec); err != nil {
						t.Errorf("Apply: %v", err)
						return
					}
					continue
				}
				batch = append(batch, Entry{Token: uint64(i), Key: k, Record: rec})
			}
			if _, err := s.ApplyBatch(batch); err != nil {
				t.Errorf("ApplyBatch: %v", err)
			}
		})
	}
	wg.Wait()
	for i := range keys {
		rec, found, err := s.Get(uint64(i), fmt.Appendf(nil, "k%04d", i))
		if err != nil || !found {
			t.Fatalf("Get k%04d: found %v, err %v", i, found, err)
		}
		if want := uint64(10*i + writers - 1); rec.TS != want {
			t.Errorf("k%04d: got TS %d, want %d", i, rec.TS, want)
		}
	}
	if got := s.KeyCount(); got != keys {
		t.Errorf("got key count %d, want %d", got, keys)
	}
}
