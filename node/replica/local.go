package replica

import (
	"context"
	"fmt"
	"sync"
	"time"

	"ringkv/node/ring"
	"ringkv/node/store"
)

// Local is this node's own store as a Replica, with no network hop. The
// coordinator calls it for itself, and the gRPC Replica service calls it for
// remote coordinators, so per-vnode accounting and the view check happen in
// one place. Safe for concurrent use.
//
// # The view check
//
// With a view (LocalView), a write routed by an older view than this node's
// is refused with ErrStaleView when that makes its routing wrong:
//   - this node has begun a ring change the sender has not: the sender did not
//     also write to the change's pending replicas, and a range this node
//     streams to one of them may already be past the key;
//   - this node's ring is settled and does not make it a replica of the key: it
//     has handed the key's range over (or is about to delete it).
//
// A write routed by the same or a newer view is taken (the sender knows at
// least as much), and so is every write while this node has no ring yet (a
// newcomer takes the writes for the ranges it will own).
//
// Fence closes the race between that check and a range stream: it returns
// once this node has applied a view and every write admitted under an older
// one has reached the store, so a scan started afterwards sees all of them,
// and every later write either carries the change or is refused.
type Local struct {
	st   *store.Store
	obs  VnodeObserver
	self string
	view func() *ring.View
	wait func(ctx context.Context, vid ring.ViewID) error
	// timed, when set, is told how long each write took the store (LocalTimed).
	timed func(d time.Duration, err error)

	// gate is held shared from a write's view check until its store write is done, and
	// exclusively, for an instant, by Fence.
	gate sync.RWMutex
}

var (
	_ Replica     = (*Local)(nil)
	_ asyncWriter = (*Local)(nil)
)

// LocalOption configures a Local.
type LocalOption func(*Local)

// LocalView makes a Local check writes against this node's view (see Local): self is this
// node's id, view returns the ring view it routes by (nil while it awaits admission), and wait
// blocks until it has applied a view at least vid (cluster.Cluster.WaitView), for Fence.
func LocalView(self string, view func() *ring.View, wait func(ctx context.Context, vid ring.ViewID) error) LocalOption {
	return func(l *Local) { l.self, l.view, l.wait = self, view, wait }
}

// LocalTimed makes a Local tell f how long each write it applies took the store, whoever
// coordinates it (Coordinator.ObserveStoreWrite: a slow disk, gray.go). f must be safe for
// concurrent use.
func LocalTimed(f func(d time.Duration, err error)) LocalOption {
	return func(l *Local) { l.timed = f }
}

// NewLocal returns st as a Replica; obs may be nil.
func NewLocal(st *store.Store, obs VnodeObserver, opts ...LocalOption) *Local {
	l := &Local{st: st, obs: obs}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Read returns the stored version of key, or refuses with ErrRangeDamaged while the key's
// token lies in a range the store marked damaged: a copy that may miss acknowledged writes
// is not a replica's answer until it is repaired from the peers.
func (l *Local) Read(ctx context.Context, key []byte) (store.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, false, err
	}
	token := ring.Token(key)
	if l.st.Damaged(token) {
		return store.Record{}, false, fmt.Errorf("local read: %w", ErrRangeDamaged)
	}
	rec, found, err := l.st.Get(token, key)
	if err != nil {
		return store.Record{}, false, fmt.Errorf("local read: %w", err)
	}
	if l.obs != nil {
		l.obs.ObserveVnode(token, false, len(key)+len(rec.Value))
	}
	return rec, found, nil
}

// Write applies rec unless the store holds a version at least as new, or refuses it with
// ErrStaleView (see Local).
func (l *Local) Write(ctx context.Context, key []byte, rec store.Record, vid ring.ViewID) (bool, error) {
	token, err := l.beginWrite(ctx, key, vid)
	if err != nil {
		return false, err
	}
	start := time.Now()
	applied, err := l.st.Apply(token, key, rec)
	l.gate.RUnlock()
	return l.wrote(token, key, rec, start, applied, err)
}

// beginWrite admits a write of key routed by view vid (ctx not done, the view check) and then
// holds the gate shared, which the caller releases once the store is done with the write, so
// that Fence waits for it.
func (l *Local) beginWrite(ctx context.Context, key []byte, vid ring.ViewID) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	token := ring.Token(key)
	l.gate.RLock()
	if err := l.admit(token, vid); err != nil {
		l.gate.RUnlock()
		return 0, err
	}
	return token, nil
}

// wrote ends a write begun at start that the store answered with applied and err: it is
// timed, counted on its vnode and its error said to be the local write's.
func (l *Local) wrote(token uint64, key []byte, rec store.Record, start time.Time, applied bool, err error) (bool, error) {
	if l.timed != nil {
		l.timed(time.Since(start), err)
	}
	if err != nil {
		return false, fmt.Errorf("local write: %w", err)
	}
	if l.obs != nil {
		l.obs.ObserveVnode(token, true, len(key)+len(rec.Value))
	}
	return applied, nil
}

// WriteAsync is Write without a goroutine waiting for the store: the write joins the store's
// group commit (store.ApplyAsync) and done gets Write's result where that commit ends, so it
// must not block. It always returns true; done runs before it returns when the write is
// refused at once (ctx done, the view check, a full disk).
func (l *Local) WriteAsync(ctx context.Context, key []byte, rec store.Record, vid ring.ViewID, done func(applied bool, err error)) bool {
	token, err := l.beginWrite(ctx, key, vid)
	if err != nil {
		done(false, err)
		return true
	}
	start := time.Now()
	// The gate is held shared until the commit has ended, as Write holds it.
	l.st.ApplyAsync(token, key, rec, func(applied bool, err error) {
		l.gate.RUnlock()
		done(l.wrote(token, key, rec, start, applied, err))
	})
	return true
}

// WriteItem is one write of a WriteMany: the key, its record and the view the coordinator
// routed it by; Applied and Err are set by WriteMany.
type WriteItem struct {
	Key     []byte
	Rec     store.Record
	View    ring.ViewID
	Applied bool
	Err     error
}

// WriteMany does what Write does for each item, the items that pass the view check in one
// group commit (store.ApplyMany): a batch of replica writes costs one wait for the store, not
// a goroutine each. Each item's outcome is set in it.
func (l *Local) WriteMany(ctx context.Context, items []WriteItem) {
	if err := ctx.Err(); err != nil {
		for i := range items {
			items[i].Applied, items[i].Err = false, err
		}
		return
	}
	entries := make([]store.Entry, 0, len(items))
	which := make([]int, 0, len(items)) // entries[j] is items[which[j]]
	l.gate.RLock()
	for i := range items {
		it := &items[i]
		it.Applied, it.Err = false, nil
		token := ring.Token(it.Key)
		if err := l.admit(token, it.View); err != nil {
			it.Err = err
			continue
		}
		entries = append(entries, store.Entry{Token: token, Key: it.Key, Record: it.Rec})
		which = append(which, i)
	}
	out := make([]store.Outcome, len(entries))
	start := time.Now()
	if len(entries) > 0 {
		l.st.ApplyMany(entries, out)
	}
	took := time.Since(start)
	l.gate.RUnlock()
	for j, o := range out {
		it := &items[which[j]]
		// Each write of the group waited for the one commit (LocalTimed).
		if l.timed != nil {
			l.timed(took, o.Err)
		}
		if o.Err != nil {
			it.Err = fmt.Errorf("local write: %w", o.Err)
			continue
		}
		it.Applied = o.Applied
		if l.obs != nil {
			l.obs.ObserveVnode(entries[j].Token, true, len(it.Key)+len(it.Rec.Value))
		}
	}
}

// admit is the view check of Write (see Local).
func (l *Local) admit(token uint64, vid ring.ViewID) error {
	if l.view == nil {
		return nil
	}
	v := l.view()
	if v == nil || v.Current == nil {
		return nil
	}
	mine := v.ID()
	if !vid.Less(mine) {
		return nil
	}
	if v.Next != nil {
		return fmt.Errorf("%w: routed by epoch %d change %d; this node has begun change %d at epoch %d",
			ErrStaleView, vid.Epoch, vid.Change, mine.Change, mine.Epoch)
	}
	var buf [8]ring.Member
	for _, m := range v.Current.LookupInto(token, v.Current.ReplicationFactor(), buf[:0]) {
		if m.ID == l.self {
			return nil
		}
	}
	return fmt.Errorf("%w: routed by epoch %d; not a replica of the key at epoch %d", ErrStaleView, vid.Epoch, mine.Epoch)
}

// Fence waits until this node has applied vid (see LocalView) and every write admitted under
// an older view has reached the store. Without a view it returns at once.
func (l *Local) Fence(ctx context.Context, vid ring.ViewID) error {
	if l.wait == nil {
		return nil
	}
	if err := l.wait(ctx, vid); err != nil {
		return fmt.Errorf("fence at epoch %d change %d: %w", vid.Epoch, vid.Change, err)
	}
	l.gate.Lock()
	l.gate.Unlock() //nolint:staticcheck // an empty critical section: waits out the writes admitted before
	return nil
}
