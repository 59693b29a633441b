package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Visit calls fn for every record with a token in (start, end], in ring order clockwise from
// start (by token, then by key), from one consistent snapshot, checking ctx between keys. It
// is Scan without the copies, for a reader that only looks (repair's Merkle trees): key and
// rec.Value alias badger's memory and are valid only during fn. An error from fn stops the
// walk and is returned.
func (s *Store) Visit(ctx context.Context, start, end uint64, fn func(token uint64, key []byte, rec Record) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchSize: 100})
		defer it.Close()
		for _, r := range spans(start, end) {
			err := iterate(it, r, nil, func(item *badger.Item, token uint64) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				k := item.Key()
				return item.Value(func(v []byte) error {
					var rec Record
					if err := rec.decode(v); err != nil {
						return fmt.Errorf("read %x: %w", k, err)
					}
					return fn(token, k[tokenLen:], rec)
				})
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// PurgeTombstones deletes the tombstones with a token in (start, end] whose timestamp is below
// before, and returns how many it deleted. Values are never touched.
//
// A purge never races a write of the same key into losing it: each candidate is deleted under
// the key's stripe lock (the lock Apply and ApplyBatch hold across their read-compare-write)
// and only if the key still holds the very tombstone that was found. A write that committed
// in between is kept; one that waits for the lock lands after the delete, as a new key.
func (s *Store) PurgeTombstones(ctx context.Context, start, end, before uint64) (purged int, err error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.readOnly.Load() {
		return 0, s.writable(0)
	}
	type cand struct {
		sk []byte
		ts uint64
	}
	var cands []cand
	err = s.Visit(ctx, start, end, func(token uint64, key []byte, rec Record) error {
		if rec.Tombstone && rec.TS < before {
			cands = append(cands, cand{StoreKey(token, key), rec.TS})
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("purge (%d, %d]: %w", start, end, err)
	}
	if len(cands) == 0 {
		return 0, nil
	}
	if s.marks != nil {
		// As in DeleteRange, the sidecar's key mark goes down before the keys do: a crash in
		// between leaves more keys than it says, never fewer (which Open takes for damage).
		s.marks.set(max(0, s.keys.Load()-int64(len(cands))), 0)
		if err := s.marks.flush(); err != nil {
			return 0, fmt.Errorf("purge (%d, %d]: %w", start, end, err)
		}
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	for _, c := range cands {
		if err := ctx.Err(); err != nil {
			return purged, err
		}
		ok, err := s.purgeOne(c.sk, c.ts)
		if err != nil {
			return purged, fmt.Errorf("purge %x: %w", c.sk, err)
		}
		if ok {
			purged++
		}
	}
	return purged, nil
}

// errNotSame: the key no longer holds the tombstone a purge found.
var errNotSame = errors.New("record changed")

// purgeOne deletes sk if it still holds a tombstone stamped ts; the caller holds dbMu shared.
func (s *Store) purgeOne(sk []byte, ts uint64) (bool, error) {
	stripe := stripeOf(sk)
	mu := &s.locks[stripe]
	mu.Lock()
	defer mu.Unlock()
	err := s.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(sk)
		if err != nil {
			return err
		}
		if err := item.Value(func(v []byte) error {
			var cur Record
			if err := cur.decode(v); err != nil {
				return err
			}
			if !cur.Tombstone || cur.TS != ts {
				return errNotSame
			}
			return nil
		}); err != nil {
			return err
		}
		return txn.Delete(sk)
	})
	s.stamps.drop(stripe, sk) // deleted, or (on an error) not known
	switch {
	case errors.Is(err, errNotSame), errors.Is(err, badger.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	s.keys.Add(-1)
	return true, nil
}
