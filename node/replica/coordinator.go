package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"ringkv/node/hlc"
	"ringkv/node/ring"
)

// Coordinator runs client operations against a key's replicas. Safe for
// concurrent use. It owns goroutines (replica calls still running after an
// answer, reconcile workers); Close stops them and waits.
type Coordinator struct {
	cfg   Config
	self  string
	view  func() *ring.View
	local Replica
	peers func(ring.Member) Replica
	clock *hlc.Clock
	obs   Observer

	readP99 *quantile // replica reads from peers

	peersMu sync.RWMutex
	peerSt  map[string]*peer

	// selfLink is the record of calls to this node's own store; views the peers' link views
	// as last heard (gray.go).
	selfLink  link
	viewsMu   sync.Mutex
	views     map[string]heardView
	grayHeld  map[string]heldVerdict // guarded by viewsMu
	grayFirst map[string]firstDrawn  // guarded by viewsMu
	calledBy  map[string]bool        // peers that called Links on this node; guarded by viewsMu
	// grayNow is the last verdict, for the read order (grayPeers).
	grayNow atomic.Pointer[grayCache]
	// flapped counts the departures and comebacks of peers seen (setDown): every watchPeer
	// probes its peer when it grows, so that the peers hear of a flap at once (gray.go).
	flapped atomic.Uint64

	reconciles chan reconcileJob
	// readers hands a read that waits for its replica (this node's store) to an idle
	// reader goroutine (read.go).
	readers chan readCall
	// hints is Config.Hints (nil: no hints). hintKick wakes the handoff goroutine; hintNext
	// paces it (owned by it).
	hints    HintLog
	hintKick chan struct{}
	hintNext time.Time

	base   context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.RWMutex // guards closed against wg.Add during Close
	closed bool
	wg     sync.WaitGroup
}

// peer is what the coordinator knows about one peer.
type peer struct {
	br      *breaker
	latency ewma
	// tail is the p90 of its calls' latencies: how long a read sent to it may take before
	// it is hedged (hedgeDelay).
	tail *quantile
	link link // recent calls and probes, departures and comebacks (gray.go)
	// watched is the Replica whose transport watchPeer follows (guarded by
	// Coordinator.peersMu); contacted turns true once its connection has
	// either come up or failed to: the first attempt is over.
	watched   Replica
	contacted atomic.Bool
	// down is true while the peer's connection has failed or its last probe did not
	// answer (see watchPeer); false for a peer without a Transport.
	down atomic.Bool
	// noLinks is true once the peer answered Links with Unimplemented: it is probed by a
	// health check instead.
	noLinks atomic.Bool
}

// target is one replica of one request.
type target struct {
	id string
	r  Replica
	p  *peer // nil for this node itself
}

// New returns a Coordinator for the node self. view returns the current ring
// view (nil before admission); local is this node's store; peers returns the
// Replica for another member (nil when it has none: the call fails). Zero
// fields of cfg take their defaults. clock stamps writes; obs may be nil.
func New(cfg Config, self string, view func() *ring.View, local Replica, peers func(m ring.Member) Replica, clock *hlc.Clock, obs Observer) *Coordinator {
	cfg = cfg.withDefaults()
	if clock == nil {
		clock = hlc.New(nil)
	}
	c := &Coordinator{
		cfg:        cfg,
		self:       self,
		view:       view,
		local:      local,
		peers:      peers,
		clock:      clock,
		obs:        obs,
		readP99:    newQuantile(0.99),
		peerSt:     make(map[string]*peer),
		views:      make(map[string]heardView),
		grayHeld:   make(map[string]heldVerdict),
		grayFirst:  make(map[string]firstDrawn),
		calledBy:   make(map[string]bool),
		reconciles: make(chan reconcileJob, cfg.ReconcileQueue),
		readers:    make(chan readCall),
		hintKick:   make(chan struct{}, 1),
	}
	if cfg.Hints != nil {
		c.hints = cfg.Hints
	}
	c.base, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(cfg.ReconcileWorkers)
	for range cfg.ReconcileWorkers {
		go c.reconcileWorker()
	}
	c.wg.Add(readers)
	for range readers {
		go c.reader()
	}
	if c.hints != nil {
		c.wg.Add(1)
		go c.handoffLoop()
	}
	return c
}

// Close cancels the replica calls still running, stops the read reconciliation
// workers and waits for every goroutine of c. Operations after Close fail
// with ErrClosed.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// spawn runs fn in a goroutine owned by c; false when c is closed.
func (c *Coordinator) spawn(fn func()) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// track counts a replica call that completes without a goroutine of its own (WriteAsync) as
// one of c's, so that Close waits for it; the caller calls c.wg.Done when it completes. False
// when c is closed.
func (c *Coordinator) track() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// targets maps members to replicas: this node to local, the others to peers.
func (c *Coordinator) targets(ms []ring.Member) []target {
	ts := make([]target, len(ms))
	for i, m := range ms {
		if m.ID == c.self {
			ts[i] = target{id: m.ID, r: c.local}
			continue
		}
		var r Replica
		if c.peers != nil {
			r = c.peers(m)
		}
		p := c.peerState(m.ID)
		if r != nil {
			c.watch(m.ID, p, r)
		}
		ts[i] = target{id: m.ID, r: r, p: p}
	}
	return ts
}

// prepare validates a request and resolves ack/from against the ring.
func (c *Coordinator) prepare(key []byte, value []byte, ack, from int) (*ring.View, int, int, error) {
	if c.base.Err() != nil {
		return nil, 0, 0, ErrClosed
	}
	switch {
	case len(key) == 0:
		return nil, 0, 0, fmt.Errorf("%w: empty key", ErrInvalidArgument)
	case len(key) > c.cfg.MaxKeyBytes:
		return nil, 0, 0, fmt.Errorf("%w: key is %d bytes, limit %d", ErrKeyTooLarge, len(key), c.cfg.MaxKeyBytes)
	case len(value) > c.cfg.MaxValueBytes:
		return nil, 0, 0, fmt.Errorf("%w: value is %d bytes, limit %d", ErrValueTooLarge, len(value), c.cfg.MaxValueBytes)
	}
	v := c.view()
	if v == nil || v.Current == nil {
		return nil, 0, 0, ErrNotAdmitted
	}
	ack, from, err := Quorum(ack, from, v.Current.Replicas())
	if err != nil {
		return nil, 0, 0, err
	}
	return v, ack, from, nil
}

// callCtx is the context shared by the replica calls of one operation:
// cancelled by Close but not by the client's context (calls outlive the
// answer: late writes still land, late reads still feed reconciliation), with
// the per-replica deadline counted from the operation's start. The
// operation and every call hold a reference; the last release cancels it.
type callCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
	refs   atomic.Int32
}

func (c *Coordinator) newCallCtx() *callCtx {
	cc := &callCtx{}
	cc.ctx, cc.cancel = context.WithTimeout(c.base, c.cfg.ReplicaTimeout)
	cc.refs.Store(1)
	return cc
}

func (cc *callCtx) acquire() { cc.refs.Add(1) }

func (cc *callCtx) release() {
	if cc.refs.Add(-1) == 0 {
		cc.cancel()
	}
}

// observe reports one client operation on key, which moved n bytes of value.
func (c *Coordinator) observe(op Op, key []byte, n int, start time.Time, err error) {
	d := time.Since(start)
	if c.obs != nil {
		c.obs.ObserveOp(op, RoleCoordinator, d, err)
	}
	if c.cfg.Keys != nil && !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrKeyTooLarge) && !errors.Is(err, ErrValueTooLarge) {
		c.cfg.Keys.ObserveKey(op, key, ring.Token(key), n, d, err)
	}
}

// callError names the replica in a failed call's error, and says when it was
// asked although its breaker was open (needed).
func callError(t target, needed bool, err error) error {
	switch {
	case err == nil:
		return nil
	case needed:
		return fmt.Errorf("replica %s (asked with its breaker open): %w", t.id, err)
	}
	return fmt.Errorf("replica %s: %w", t.id, err)
}
