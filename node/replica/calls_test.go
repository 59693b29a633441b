package replica

import (
	"sync"
	"testing"
	"time"

	"ringkv/node/ring"
)

// callLog records what a coordinator tells its CallObserver.
type callLog struct {
	mu     sync.Mutex
	calls  map[string]int
	tokens map[uint64]bool
	failed map[string]int
	hedges map[string]int
	trips  map[string]int
}

func newCallLog() *callLog {
	return &callLog{calls: map[string]int{}, tokens: map[uint64]bool{}, failed: map[string]int{}, hedges: map[string]int{}, trips: map[string]int{}}
}

func (l *callLog) ObserveCall(peer string, token uint64, _ bool, _ time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[peer]++
	l.tokens[token] = true
	if err != nil {
		l.failed[peer]++
	}
}

func (l *callLog) ObserveHedge(peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hedges[peer]++
}

func (l *callLog) ObserveBreakerTrip(peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trips[peer]++
}

func (l *callLog) get(m map[string]int, peer string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return m[peer]
}

// TestCallObserver checks that the coordinator reports its calls to peers (not to itself)
// with the key's token, a breaker that opens, and the peer a read was hedged away from.
func TestCallObserver(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	log := newCallLog()
	co := c.coordinator(t, "n0", Config{BreakerFailures: 1, Calls: log}, nil)
	putKEverywhere(t, ctx, co)
	if log.get(log.calls, "n0") != 0 || log.get(log.calls, "n1") != 1 || log.get(log.calls, "n2") != 1 {
		t.Errorf("calls: got %v, want one each to n1 and n2, none to n0 (itself)", log.calls)
	}
	if !log.tokens[ring.Token([]byte("k"))] || len(log.tokens) != 1 {
		t.Errorf("tokens: got %v, want only the key's", log.tokens)
	}
	c.nodes["n1"].set(modeDown)
	co.Put(ctx, []byte("k"), []byte("v"), 3, 3)
	if got := log.get(log.trips, "n1"); got != 1 || log.get(log.failed, "n1") != 1 {
		t.Errorf("n1 down: got %d trips and %d failed calls, want 1 and 1", got, log.get(log.failed, "n1"))
	}
	c.nodes["n1"].set(modeOK)

	// A coordinator outside the ring asks peers only: the first of the read set hangs, the
	// read is hedged away from it.
	log2 := newCallLog()
	out := c.coordinator(t, "", Config{ReplicaTimeout: time.Hour, HedgeMin: time.Millisecond, HedgeMax: time.Millisecond, Calls: log2}, nil)
	first := c.view.Load().ReadSet(ring.Token([]byte("k")), 3)[0].ID
	c.nodes[first].set(modeHang)
	defer c.nodes[first].set(modeOK)
	if _, found, err := out.Get(ctx, []byte("k"), 1, 3); err != nil || !found {
		t.Fatalf("Get with %s hanging: found %v err %v, want found", first, found, err)
	}
	if got := log2.get(log2.hedges, first); got != 1 {
		t.Errorf("hedges: got %v, want one from %s", log2.hedges, first)
	}
}
