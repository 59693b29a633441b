//go:build !race

package latency

import (
	"runtime"
	"testing"
	"time"
)

// TestHeapPerVnode measures the heap of a tracker whose every vnode of a 3-node ring (192
// vnodes, replication 3) saw reads, writes and calls to its two peers, against VnodeBytes.
func TestHeapPerVnode(t *testing.T) {
	rg := testRing(t, 3, 64, "n1", "n2", "n3")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr, _ := newTracker(t, rg)
	for _, r := range rg.Ranges() {
		tr.ObserveOp(r.End, false, time.Millisecond, false)
		tr.ObserveOp(r.End, true, time.Millisecond, false)
		tr.ObserveCall("n2", r.End, true, time.Millisecond, nil)
		tr.ObserveCall("n3", r.End, true, time.Millisecond, nil)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	got := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	n := len(rg.Ranges())
	bound := int64(n*VnodeBytes(2) + 2*PeerBytes() + n*64) // + the table: ends, starts, pointers
	t.Logf("%d vnodes: heap %d B (%d B per vnode), bound %d B", n, got, got/int64(n), bound)
	if got > bound*5/4 {
		t.Errorf("heap: got %d B, want at most %d B (+25%%)", got, bound)
	}
	runtime.KeepAlive(tr)
}
