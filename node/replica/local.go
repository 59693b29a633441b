package replica

import (
	"context"
	"fmt"

	"ringkv/node/ring"
	"ringkv/node/store"
)

// Local is this node's own store as a Replica, with no network hop. The
// coordinator calls it for itself, and the gRPC Replica service calls it for
// remote coordinators, so per-vnode accounting happens in one place. Safe
// for concurrent use.
type Local struct {
	st  *store.Store
	obs VnodeObserver
}

var _ Replica = (*Local)(nil)

// NewLocal returns st as a Replica; obs may be nil.
func NewLocal(st *store.Store, obs VnodeObserver) *Local {
	return &Local{st: st, obs: obs}
}

// Read returns the stored version of key.
func (l *Local) Read(ctx context.Context, key []byte) (store.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, false, err
	}
	token := ring.Token(key)
	rec, found, err := l.st.Get(token, key)
	if err != nil {
		return store.Record{}, false, fmt.Errorf("local read: %w", err)
	}
	if l.obs != nil {
		l.obs.ObserveVnode(token, false, len(key)+len(rec.Value))
	}
	return rec, found, nil
}

// Write applies rec unless the store holds a version at least as new.
func (l *Local) Write(ctx context.Context, key []byte, rec store.Record) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	token := ring.Token(key)
	applied, err := l.st.Apply(token, key, rec)
	if err != nil {
		return false, fmt.Errorf("local write: %w", err)
	}
	if l.obs != nil {
		l.obs.ObserveVnode(token, true, len(key)+len(rec.Value))
	}
	return applied, nil
}
