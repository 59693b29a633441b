package replica

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"ringkv/node/ring"
	"ringkv/node/store"
)

// TestLocalTimesEveryWrite: the store's writes are timed for the slow-disk verdict whether
// they come one by one (Write: this node coordinates) or in a group commit (WriteMany: its
// peers' replica writes), so that a node that coordinates nothing still shows its disk.
func TestLocalTimesEveryWrite(t *testing.T) {
	ctx := testCtx(t)
	var timed atomic.Int64
	l := NewLocal(openStore(t), nil, LocalTimed(func(d time.Duration, err error) {
		if err == nil {
			timed.Add(1)
		}
	}))
	if _, err := l.Write(ctx, []byte("one"), store.Record{TS: 1, Value: []byte("v")}, ring.ViewID{}); err != nil {
		t.Fatal(err)
	}
	items := make([]WriteItem, 3)
	for i := range items {
		items[i] = WriteItem{Key: fmt.Appendf(nil, "many-%d", i), Rec: store.Record{TS: 1, Value: []byte("v")}}
	}
	l.WriteMany(ctx, items)
	for _, it := range items {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
	}
	if got := timed.Load(); got != 4 {
		t.Errorf("timed %d writes, want 4 (1 by Write, 3 by WriteMany)", got)
	}
}
