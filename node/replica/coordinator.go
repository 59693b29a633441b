package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

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
	// hints is Config.Hints, or a log in memory the coordinator owns (ownHints); nil without
	// hints. hintKick wakes the handoff goroutine; hintNext paces it (owned by it).
	hints    HintLog
	ownHints bool
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
	// watched is the Replica whose transport watchPeer follows (guarded by
	// Coordinator.peersMu); contacted turns true once its connection has
	// either come up or failed to: the first attempt is over.
	watched   Replica
	contacted atomic.Bool
	// down is true while the peer's connection has failed or its last probe did not
	// answer (see watchPeer); false for a peer without a Transport.
	down atomic.Bool
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
		cfg:      cfg,
		self:     self,
		view:     view,
		local:    local,
		peers:    peers,
		clock:    clock,
		obs:      obs,
		readP99:  newQuantile(0.99),
		peerSt:   make(map[string]*peer),
		repairs:  make(chan repairJob, cfg.RepairQueue),
		hintKick: make(chan struct{}, 1),
	}
	switch {
	case cfg.HintBytes < 0:
	case cfg.Hints != nil:
		c.hints = cfg.Hints
	default:
		h, err := store.OpenHints(store.HintsConfig{InMemory: true, MaxBytes: int64(cfg.HintBytes), MaxAge: cfg.HintWindow,
			Now: cfg.Now, Logger: cfg.Logger})
		if err != nil {
			if cfg.Logger != nil {
				cfg.Logger.Warn("no hints: open in memory", "err", err)
			}
		} else {
			c.hints, c.ownHints = h, true
		}
	}
	c.base, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(cfg.RepairWorkers)
	for range cfg.RepairWorkers {
		go c.repairWorker()
	}
	if c.hints != nil {
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
	if c.ownHints {
		return c.hints.(*store.Hints).Close()
	}
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
	p = &peer{br: newBreaker(c.cfg.BreakerFailures, c.cfg.BreakerSlowSpell)}
	c.peerSt[id] = p
	return p
}

// watch makes sure a goroutine follows r's transport for the peer p (see
// watchPeer): started with the first Replica seen for the peer, restarted when
// the peer's Replica changes (a new address).
func (c *Coordinator) watch(id string, p *peer, r Replica) {
	c.peersMu.RLock()
	same := p.watched == r
	c.peersMu.RUnlock()
	if same {
		return
	}
	tr, ok := r.(transporter)
	if !ok || tr.Transport() == nil {
		p.contacted.Store(true) // nothing to wait for
		return
	}
	c.peersMu.Lock()
	if p.watched == r {
		c.peersMu.Unlock()
		return
	}
	p.watched = r
	c.peersMu.Unlock()
	c.spawn(func() { c.watchPeer(id, p, r, tr.Transport()) })
}

// watchPeer follows one peer's connection until Close or until the peer's
// Replica changes: it starts connecting at once (so the first request, and
// the node's readiness, find the connection up), closes the breaker as soon
// as the connection turns ready, and while the breaker is open probes the
// peer every ProbeInterval, waking its connection out of reconnect backoff,
// so that no client request has to be the probe.
func (c *Coordinator) watchPeer(id string, p *peer, r Replica, t Transport) {
	t.Wake()
	state := t.State()
	moved := false // the connection has left its first idle state
	var probed time.Time
	for c.base.Err() == nil {
		c.peersMu.RLock()
		current := p.watched == r
		c.peersMu.RUnlock()
		if !current {
			return
		}
		switch state {
		case connectivity.Ready:
			p.contacted.Store(true)
			if !p.br.allow() {
				p.br.reachable()
				c.logPeer(id, "connection ready again")
				c.kickHints()
			}
		case connectivity.TransientFailure:
			p.contacted.Store(true)
			p.down.Store(true)
		case connectivity.Idle:
			// Idle again after an attempt: it connected and lost the connection (a
			// peer that stopped) before this goroutine saw it ready.
			if moved {
				p.contacted.Store(true)
			} else {
				t.Wake()
			}
		}
		moved = moved || state != connectivity.Idle
		// Probe every ProbeInterval while the breaker is open, and every HealthInterval
		// while it is closed: a silent partition leaves a connection READY, and only an
		// answer tells that the peer is there (down, for Unreachable).
		if every := c.cfg.HealthInterval; !p.br.allow() || time.Since(probed) >= every {
			probed = time.Now()
			ctx, cancel := context.WithTimeout(c.base, c.cfg.ProbeTimeout)
			err := t.Probe(ctx)
			cancel()
			if c.base.Err() != nil {
				return
			}
			p.down.Store(err != nil)
			if err == nil && !p.br.allow() {
				p.br.reachable()
				c.logPeer(id, "answered a probe")
				c.kickHints()
			}
		}
		ctx, cancel := context.WithTimeout(c.base, c.cfg.ProbeInterval)
		t.WaitForStateChange(ctx, state)
		cancel()
		state = t.State()
	}
}

func (c *Coordinator) logPeer(id, what string) {
	if c.cfg.Logger != nil {
		c.cfg.Logger.Info("peer reachable: breaker closed", "peer", id, "how", what)
	}
}

// Unreachable returns the peers of the current ring that are down now: their
// connection failed, their last probe went unanswered, or their breaker is open.
func (c *Coordinator) Unreachable() []string {
	v := c.view()
	if v == nil || v.Current == nil {
		return nil
	}
	var out []string
	for _, t := range c.targets(v.Current.Members()) {
		if t.p != nil && (t.r == nil || t.p.down.Load() || !t.p.br.allow()) {
			out = append(out, t.id)
		}
	}
	return out
}

// QuorumLoss counts the ranges of the current ring for which this node cannot
// reach a quorum (N/2+1) of the replicas (itself included), by Unreachable.
func (c *Coordinator) QuorumLoss() (lost, total int) {
	v := c.view()
	if v == nil || v.Current == nil {
		return 0, 0
	}
	down := map[string]bool{}
	for _, id := range c.Unreachable() {
		down[id] = true
	}
	n := v.Current.Replicas()
	quorum := n/2 + 1
	for _, r := range v.Current.Ranges() {
		up := 0
		for _, m := range v.Current.Lookup(r.End, n) {
			if !down[m.ID] {
				up++
			}
		}
		total++
		if up < quorum {
			lost++
		}
	}
	return lost, total
}

// Unreached returns the peers of the current ring whose connection has not
// yet finished its first attempt (come up, or failed to), starting the
// attempt for those not yet tried. A node that has just started is usable
// once this is empty: every peer that is up is connected.
func (c *Coordinator) Unreached() []string {
	v := c.view()
	if v == nil || v.Current == nil {
		return nil
	}
	var out []string
	for _, t := range c.targets(v.Current.Members()) {
		if t.p != nil && t.r != nil && !t.p.contacted.Load() {
			out = append(out, t.id)
		}
	}
	return out
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

// admit reports whether a call to t may go out without question: it has a
// connection and its breaker is closed.
func (c *Coordinator) admit(t target) error {
	if t.r == nil {
		return fmt.Errorf("replica %s: %w: no connection", t.id, ErrReplicaUnavailable)
	}
	if t.p != nil && !t.p.br.allow() {
		return c.skipped(t)
	}
	return nil
}

// skipped is the error recorded for a replica left out because its breaker is
// open: which one, since when and why it opened.
func (c *Coordinator) skipped(t target) error {
	b := t.p.br.snapshot(t.id)
	open := ""
	if !b.Since.IsZero() {
		open = fmt.Sprintf(" for %v", c.cfg.Now().Sub(b.Since).Round(time.Millisecond))
	}
	return fmt.Errorf("replica %s skipped: %w%s after %d failures (last: %s)", t.id, ErrBreakerOpen, open, b.ConsecutiveFailures, b.Reason)
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
		// cancelled by Close: says nothing about the peer
	case errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrNotAdmitted), errors.Is(err, ErrStaleView), errors.Is(err, hlc.ErrClockOffset), errors.Is(err, store.ErrDiskFull),
		errors.Is(err, ErrRangeDamaged):
		// The peer answered with a refusal (e.g. not a replica of the key while it catches up
		// on a ring change): it is alive, and its breaker must not open on a healthy node.
		t.p.br.success()
	default:
		t.p.br.failure(c.cfg.Now(), dead(err), strings.ReplaceAll(err.Error(), "\n", "; "))
		if errors.Is(err, context.DeadlineExceeded) {
			t.p.latency.observe(c.cfg.ReplicaTimeout)
		}
	}
}

func (c *Coordinator) observe(op Op, start time.Time, err error) {
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
	if c.cfg.Writable != nil {
		if err := c.cfg.Writable(); err != nil {
			return 0, err
		}
	}
	if c.cfg.ClockCheck != nil {
		if err := c.cfg.ClockCheck(); err != nil {
			return 0, fmt.Errorf("refusing to stamp a write: %w", err)
		}
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

	// A replica whose breaker is open is passed over while the others can still
	// reach need without it; when they cannot (from the start, or once one of
	// them fails), the write goes to it anyway. Those passed over to the end
	// get a hint.
	replies := make(chan writeReply, len(ts))
	inflight, ok := 0, 0
	var errs []error
	var deferred []target
	cc := c.newCallCtx()
	defer cc.release()
	send := func(t target, needed bool) bool {
		cc.acquire()
		if !c.spawn(func() { c.callWrite(cc, t, needed, key, rec, vid, replies) }) {
			cc.release()
			return false
		}
		inflight++
		return true
	}
	for _, t := range ts {
		switch err := c.admit(t); {
		case err == nil:
			if !send(t, false) {
				return ErrClosed
			}
		case t.r == nil:
			errs = append(errs, err)
			if c.hintable(t, err) {
				c.keepHint(t, key, rec)
			}
		default:
			deferred = append(deferred, t)
		}
	}
	passOver := func() {
		for _, t := range deferred {
			errs = append(errs, c.skipped(t))
			if c.base.Err() == nil {
				c.keepHint(t, key, rec)
			}
		}
	}
	for {
		for ok+inflight < need && len(deferred) > 0 {
			t := deferred[0]
			deferred = deferred[1:]
			if !send(t, true) {
				return ErrClosed
			}
		}
		if ok >= need {
			passOver()
			return nil
		}
		if ok+inflight < need {
			passOver()
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
			passOver()
			return fmt.Errorf("%w: %d of %d acknowledged, %d needed: %w",
				ErrNotEnoughReplicas, ok, len(ts), need, ctx.Err())
		}
	}
}

func (c *Coordinator) callWrite(cc *callCtx, t target, needed bool, key []byte, rec store.Record, vid ring.ViewID, replies chan<- writeReply) {
	start := time.Now()
	_, err := t.r.Write(cc.ctx, key, rec, vid)
	cc.release()
	c.account(t, time.Since(start), err, false)
	if c.hintable(t, err) {
		c.keepHint(t, key, rec)
	}
	replies <- writeReply{err: callError(t, needed, err)}
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
	any      bool  // some replica had a version
	next     int   // next target to launch
	deferred []int // targets passed over for their open breaker, launched only if needed
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
		if !c.launch(op, ack) {
			break
		}
	}
	var hedge <-chan time.Time
	if op.next < len(op.ts) || len(op.deferred) > 0 {
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
		if op.ok+op.inflight+len(op.ts)-op.next+len(op.deferred) < ack {
			for _, i := range op.deferred {
				op.errs = append(op.errs, c.skipped(op.ts[i]))
			}
			err := fmt.Errorf("%w: %d of %d answered, %d needed: %w",
				ErrNotEnoughReplicas, op.ok, len(op.ts), ack, errors.Join(op.errs...))
			c.finish(op) // op belongs to the finisher from here on
			return store.Record{}, false, err
		}
		select {
		case r := <-op.replies:
			c.take(op, r)
			if r.err != nil {
				c.launch(op, ack) // replace the failed replica at once
			}
		case <-hedge:
			hedge = nil
			for c.launch(op, ack) {
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
		case t.p.br.allow():
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

// launch sends the read to one more target: the next in order whose breaker
// is closed, else — when the calls in flight can no longer reach ack — one
// passed over for its open breaker. false when none is left.
func (c *Coordinator) launch(op *readOp, ack int) bool {
	for op.next < len(op.ts) {
		i := op.next
		op.next++
		t := op.ts[i]
		if err := c.admit(t); err != nil {
			if t.r == nil {
				op.errs = append(op.errs, err)
			} else {
				op.deferred = append(op.deferred, i)
			}
			continue
		}
		return c.send(op, i, false)
	}
	if len(op.deferred) > 0 && op.ok+op.inflight < ack {
		i := op.deferred[0]
		op.deferred = op.deferred[1:]
		return c.send(op, i, true)
	}
	return false
}

// send starts the read call to target i of op.
func (c *Coordinator) send(op *readOp, i int, needed bool) bool {
	t := op.ts[i]
	op.cc.acquire()
	if !c.spawn(func() { c.callRead(op.cc, t, needed, i, op.key, op.replies) }) {
		op.cc.release()
		op.errs = append(op.errs, ErrClosed)
		op.next, op.deferred = len(op.ts), nil
		return false
	}
	op.inflight++
	return true
}

func (c *Coordinator) callRead(cc *callCtx, t target, needed bool, i int, key []byte, replies chan<- readReply) {
	start := time.Now()
	rec, found, err := t.r.Read(cc.ctx, key)
	cc.release()
	c.account(t, time.Since(start), err, true)
	replies <- readReply{i: i, rec: rec, found: found, err: callError(t, needed, err)}
}

// take records one reply.
func (c *Coordinator) take(op *readOp, r readReply) {
	op.inflight--
	if r.err != nil {
		op.errs = append(op.errs, r.err)
		if errors.Is(r.err, ErrRangeDamaged) {
			// Not an answer, but a replica that takes writes: read repair gives it the
			// newest version.
			op.got[r.i] = &readReply{i: r.i}
		}
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

// dead reports whether a failed call shows the peer is not there (refused,
// reset, no connection: gRPC Unavailable) rather than slow or failing.
func dead(err error) bool {
	if st, ok := status.FromError(err); ok {
		return st.Code() == codes.Unavailable
	}
	return errors.Is(err, ErrReplicaUnavailable)
}
