package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"ringkv/node/hlc"
	"ringkv/node/ring"
	"ringkv/node/store"
)

// Coordinator runs client operations against a key's replicas. Safe for
// concurrent use. It owns goroutines (replica calls still running after an
// answer, read repair workers); Close stops them and waits.
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

	repairs chan repairJob
	hints   *hintStore

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
}

// target is one replica of one request.
type target struct {
	id string
	r  Replica
	p  *peer // nil for this node itself
}

type repairJob struct {
	t   target
	key []byte
	rec store.Record
	vid ring.ViewID // the view the read was routed by
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
		cfg:     cfg,
		self:    self,
		view:    view,
		local:   local,
		peers:   peers,
		clock:   clock,
		obs:     obs,
		readP99: newQuantile(0.99),
		peerSt:  make(map[string]*peer),
		repairs: make(chan repairJob, cfg.RepairQueue),
		hints:   newHintStore(cfg.HintBytes),
	}
	c.base, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(cfg.RepairWorkers)
	for range cfg.RepairWorkers {
		go c.repairWorker()
	}
	if cfg.HintBytes > 0 {
		c.wg.Add(1)
		go c.handoffLoop()
	}
	return c
}

// Close cancels the replica calls still running, stops the read repair
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

// Breakers returns the breaker of every peer in the ring and of every peer
// called before, sorted by peer.
func (c *Coordinator) Breakers() []Breaker {
	ids := map[string]bool{}
	if v := c.view(); v != nil && v.Current != nil {
		for _, m := range v.Current.Members() {
			if m.ID != c.self {
				ids[m.ID] = true
			}
		}
	}
	c.peersMu.RLock()
	for id := range c.peerSt {
		ids[id] = true
	}
	out := make([]Breaker, 0, len(ids))
	for id := range ids {
		if p, ok := c.peerSt[id]; ok {
			out = append(out, p.br.snapshot(id))
		} else {
			out = append(out, Breaker{Peer: id, State: BreakerClosed})
		}
	}
	c.peersMu.RUnlock()
	slices.SortFunc(out, func(a, b Breaker) int {
		switch {
		case a.Peer < b.Peer:
			return -1
		case a.Peer > b.Peer:
			return 1
		}
		return 0
	})
	return out
}

// HedgeDelay returns the current hedge delay of reads: the observed p99 of
// replica reads from peers, clamped to [HedgeMin, HedgeMax].
func (c *Coordinator) HedgeDelay() time.Duration {
	return min(max(c.readP99.value(), c.cfg.HedgeMin), c.cfg.HedgeMax)
}

func (c *Coordinator) peerState(id string) *peer {
	c.peersMu.RLock()
	p, ok := c.peerSt[id]
	c.peersMu.RUnlock()
	if ok {
		return p
	}
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	if p, ok := c.peerSt[id]; ok {
		return p
	}
	p = &peer{br: newBreaker(c.cfg.BreakerFailures, c.cfg.BreakerCooldown)}
	c.peerSt[id] = p
	return p
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
		ts[i] = target{id: m.ID, r: r, p: c.peerState(m.ID)}
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
// answer: late writes still land, late reads still feed read repair), with
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

// admit reports whether a call to t may go out, per its breaker.
func (c *Coordinator) admit(t target) error {
	if t.r == nil {
		return fmt.Errorf("peer %s: %w: no connection", t.id, ErrReplicaUnavailable)
	}
	if t.p != nil && !t.p.br.allow(c.cfg.Now()) {
		return fmt.Errorf("peer %s: %w", t.id, ErrBreakerOpen)
	}
	return nil
}

// account feeds the outcome of one call to t into its breaker and latency.
func (c *Coordinator) account(t target, d time.Duration, err error, read bool) {
	if t.p == nil {
		return
	}
	switch {
	case err == nil:
		t.p.br.success()
		t.p.latency.observe(d)
		if read {
			c.readP99.observe(d)
		}
	case c.base.Err() != nil:
		t.p.br.abandon() // cancelled by Close: says nothing about the peer
	case errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrNotAdmitted), errors.Is(err, ErrStaleView):
		// The peer answered with a refusal (e.g. not a replica of the key while it catches up
		// on a ring change): it is alive, and its breaker must not open on a healthy node.
		t.p.br.success()
	default:
		t.p.br.failure(c.cfg.Now())
		if errors.Is(err, context.DeadlineExceeded) {
			t.p.latency.observe(c.cfg.ReplicaTimeout)
		}
	}
}

func (c *Coordinator) observe(op string, start time.Time, err error) {
	if c.obs != nil {
		c.obs.ObserveOp(op, RoleCoordinator, time.Since(start), err)
	}
}

// Put writes value under key on ack replicas (from of them, plus pending
// ones during a ring change) and returns the version's timestamp. ack and
// from of 0 mean the defaults.
func (c *Coordinator) Put(ctx context.Context, key, value []byte, ack, from int) (uint64, error) {
	if value == nil {
		value = []byte{}
	}
	start := time.Now()
	ts, err := c.write(ctx, key, value, false, ack, from)
	c.observe(OpPut, start, err)
	return ts, err
}

// Delete writes a tombstone for key, like Put.
func (c *Coordinator) Delete(ctx context.Context, key []byte, ack, from int) (uint64, error) {
	start := time.Now()
	ts, err := c.write(ctx, key, nil, true, ack, from)
	c.observe(OpDelete, start, err)
	return ts, err
}

type writeReply struct {
	err error
}

func (c *Coordinator) write(ctx context.Context, key, value []byte, tombstone bool, ack, from int) (uint64, error) {
	v, nack, nfrom, err := c.prepare(key, value, ack, from)
	if err != nil {
		return 0, err
	}
	// Calls outlive the answer: they must not alias the caller's buffers.
	key = bytes.Clone(key)
	if !tombstone {
		value = bytes.Clone(value)
	}
	rec := store.Record{TS: c.clock.Now(), Tombstone: tombstone, Value: value}
	err = c.writeIn(ctx, v, key, rec, nack, nfrom)
	if err == nil || !errors.Is(err, ErrStaleView) || c.cfg.CatchUp == nil {
		return rec.TS, err
	}
	// A replica has begun a ring change this node has not applied yet (or has left the key's
	// replicas at a newer epoch): wait for raft to bring the newer view, then send the same
	// record again by it. Same timestamp, so replicas that took it the first time take it as
	// a no-op.
	wctx, cancel := context.WithTimeout(ctx, c.cfg.ReplicaTimeout)
	cerr := c.cfg.CatchUp(wctx, v.ID())
	cancel()
	if cerr != nil {
		return 0, fmt.Errorf("%w (catching up: %w)", err, cerr)
	}
	v, nack, nfrom, err = c.prepare(key, value, ack, from)
	if err != nil {
		return 0, err
	}
	if err := c.writeIn(ctx, v, key, rec, nack, nfrom); err != nil {
		return 0, err
	}
	return rec.TS, nil
}

// writeIn sends rec to the key's write set in view v and waits for ack + pending acks.
func (c *Coordinator) writeIn(ctx context.Context, v *ring.View, key []byte, rec store.Record, ack, from int) error {
	natural, pending := v.WriteSet(ring.Token(key), from)
	need := ack + len(pending)
	ts := c.targets(append(slices.Clip(natural), pending...))
	vid := v.ID()

	replies := make(chan writeReply, len(ts))
	inflight, ok := 0, 0
	var errs []error
	cc := c.newCallCtx()
	for _, t := range ts {
		if err := c.admit(t); err != nil {
			errs = append(errs, err)
			if c.hintable(t, err) {
				c.keepHint(t, key, rec)
			}
			continue
		}
		cc.acquire()
		if !c.spawn(func() { c.callWrite(cc, t, key, rec, vid, replies) }) {
			cc.release()
			cc.release()
			return ErrClosed
		}
		inflight++
	}
	cc.release()
	for {
		if ok >= need {
			return nil
		}
		if ok+inflight < need {
			return fmt.Errorf("%w: %d of %d acknowledged, %d needed: %w",
				ErrNotEnoughReplicas, ok, len(ts), need, errors.Join(errs...))
		}
		select {
		case r := <-replies:
			inflight--
			if r.err != nil {
				errs = append(errs, r.err)
			} else {
				ok++
			}
		case <-ctx.Done():
			return fmt.Errorf("%w: %d of %d acknowledged, %d needed: %w",
				ErrNotEnoughReplicas, ok, len(ts), need, ctx.Err())
		}
	}
}

func (c *Coordinator) callWrite(cc *callCtx, t target, key []byte, rec store.Record, vid ring.ViewID, replies chan<- writeReply) {
	start := time.Now()
	_, err := t.r.Write(cc.ctx, key, rec, vid)
	cc.release()
	c.account(t, time.Since(start), err, false)
	if c.hintable(t, err) {
		c.keepHint(t, key, rec)
	}
	if err != nil {
		err = fmt.Errorf("replica %s: %w", t.id, err)
	}
	replies <- writeReply{err: err}
}

// Get reads key from ack of its from replicas and returns the newest
// version among the replies. found is false when no replica has the key or
// the newest version is a tombstone (then rec is that tombstone). ack and
// from of 0 mean the defaults. rec.Value is shared with read repair: do not
// modify it.
func (c *Coordinator) Get(ctx context.Context, key []byte, ack, from int) (store.Record, bool, error) {
	start := time.Now()
	rec, found, err := c.get(ctx, key, ack, from)
	c.observe(OpGet, start, err)
	return rec, found, err
}

type readReply struct {
	i     int
	rec   store.Record
	found bool
	err   error
}

// readOp is the state of one read. The caller's goroutine owns it until
// the answer, then the finisher that waits for late replies.
type readOp struct {
	key      []byte
	vid      ring.ViewID
	ts       []target
	replies  chan readReply
	got      []*readReply // by target; nil until answered
	newest   store.Record
	any      bool // some replica had a version
	next     int  // next target to launch
	ok       int
	inflight int
	errs     []error
	cc       *callCtx
}

func (c *Coordinator) get(ctx context.Context, key []byte, ack, from int) (store.Record, bool, error) {
	v, ack, from, err := c.prepare(key, nil, ack, from)
	if err != nil {
		return store.Record{}, false, err
	}
	key = bytes.Clone(key) // calls and repairs outlive the answer
	op := &readOp{key: key, vid: v.ID(), ts: c.order(c.targets(v.ReadSet(ring.Token(key), from)))}
	op.replies = make(chan readReply, len(op.ts))
	op.got = make([]*readReply, len(op.ts))
	op.cc = c.newCallCtx()

	wave := ack
	if c.cfg.NoHedge {
		wave = len(op.ts)
	}
	for range wave {
		if !c.launch(op) {
			break
		}
	}
	var hedge <-chan time.Time
	if op.next < len(op.ts) {
		timer := time.NewTimer(c.HedgeDelay())
		defer timer.Stop()
		hedge = timer.C
	}
	for {
		if op.ok >= ack {
			rec, found := op.newest, op.any && !op.newest.Tombstone
			c.finish(op)
			return rec, found, nil
		}
		if op.ok+op.inflight+len(op.ts)-op.next < ack {
			err := fmt.Errorf("%w: %d of %d answered, %d needed: %w",
				ErrNotEnoughReplicas, op.ok, len(op.ts), ack, errors.Join(op.errs...))
			c.finish(op) // op belongs to the finisher from here on
			return store.Record{}, false, err
		}
		select {
		case r := <-op.replies:
			c.take(op, r)
			if r.err != nil {
				c.launch(op) // replace the failed replica at once
			}
		case <-hedge:
			hedge = nil
			for c.launch(op) {
			}
		case <-ctx.Done():
			err := fmt.Errorf("%w: %d of %d answered, %d needed: %w",
				ErrNotEnoughReplicas, op.ok, len(op.ts), ack, ctx.Err())
			c.finish(op)
			return store.Record{}, false, err
		}
	}
}

// order sorts targets for a read: this node first, then peers with closed
// breakers by latency EWMA, then the others; ties keep ring order.
func (c *Coordinator) order(ts []target) []target {
	rank := func(t target) int {
		switch {
		case t.p == nil:
			return 0
		case t.p.br.closed():
			return 1
		}
		return 2
	}
	slices.SortStableFunc(ts, func(a, b target) int {
		ra, rb := rank(a), rank(b)
		if ra != rb {
			return ra - rb
		}
		if ra == 1 {
			la, lb := a.p.latency.value(), b.p.latency.value()
			switch {
			case la < lb:
				return -1
			case la > lb:
				return 1
			}
		}
		return 0
	})
	return ts
}

// launch sends the read to the next target whose breaker admits it; false
// when none is left. Targets refused by their breaker count as failed.
func (c *Coordinator) launch(op *readOp) bool {
	for op.next < len(op.ts) {
		i := op.next
		op.next++
		t := op.ts[i]
		if err := c.admit(t); err != nil {
			op.errs = append(op.errs, err)
			continue
		}
		op.cc.acquire()
		if !c.spawn(func() { c.callRead(op.cc, t, i, op.key, op.replies) }) {
			op.cc.release()
			op.errs = append(op.errs, ErrClosed)
			op.next = len(op.ts)
			return false
		}
		op.inflight++
		return true
	}
	return false
}

func (c *Coordinator) callRead(cc *callCtx, t target, i int, key []byte, replies chan<- readReply) {
	start := time.Now()
	rec, found, err := t.r.Read(cc.ctx, key)
	cc.release()
	c.account(t, time.Since(start), err, true)
	if err != nil {
		err = fmt.Errorf("replica %s: %w", t.id, err)
	}
	replies <- readReply{i: i, rec: rec, found: found, err: err}
}

// take records one reply.
func (c *Coordinator) take(op *readOp, r readReply) {
	op.inflight--
	if r.err != nil {
		op.errs = append(op.errs, r.err)
		return
	}
	op.ok++
	op.got[r.i] = &r
	if r.found {
		c.clock.Update(r.rec.TS)
		if !op.any || r.rec.Newer(op.newest) {
			op.newest, op.any = r.rec, true
		}
	}
}

// finish hands op to a goroutine that waits for the replies still in
// flight, then repairs the replicas that answered with an older version or
// none. Without replies in flight it repairs at once.
func (c *Coordinator) finish(op *readOp) {
	op.cc.release() // launches no more calls
	if op.inflight == 0 {
		c.repair(op)
		return
	}
	c.spawn(func() {
		for op.inflight > 0 {
			select {
			case r := <-op.replies:
				c.take(op, r)
			case <-c.base.Done():
				return
			}
		}
		c.repair(op)
	})
}

// repair queues a write of the newest version to every stale replica of op.
func (c *Coordinator) repair(op *readOp) {
	if !op.any {
		return
	}
	for i, r := range op.got {
		if r == nil || (r.found && !op.newest.Newer(r.rec)) {
			continue
		}
		select {
		case c.repairs <- repairJob{t: op.ts[i], key: op.key, rec: op.newest, vid: op.vid}:
		default: // queue full: a later read repairs it
		}
	}
}

func (c *Coordinator) repairWorker() {
	defer c.wg.Done()
	for {
		select {
		case job := <-c.repairs:
			c.repairOne(job)
		case <-c.base.Done():
			return
		}
	}
}

func (c *Coordinator) repairOne(job repairJob) {
	if c.admit(job.t) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.base, c.cfg.ReplicaTimeout)
	start := time.Now()
	_, err := job.t.r.Write(ctx, job.key, job.rec, job.vid)
	cancel()
	c.account(job.t, time.Since(start), err, false)
	if err == nil && c.obs != nil {
		c.obs.ReadRepair()
	}
}
