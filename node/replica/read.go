// The read path: Get asks ack replicas, fastest first (peers named gray last), hedges to
// more once the first wave has taken longer than its peers usually take (hedgeDelay), and
// merges the replies to the newest version.

package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"ringkv/node/ring"
	"ringkv/node/store"
)

// HedgeDelay returns the hedge delay of a read whose first wave has no peer with figures
// yet: the observed p99 of replica reads from peers, clamped to [HedgeMin, HedgeMax].
func (c *Coordinator) HedgeDelay() time.Duration {
	return min(max(c.readP99.value(), c.cfg.HedgeMin), c.cfg.HedgeMax)
}

// hedgeDelay is how long op's first wave may take before the read is hedged: the p90 of the
// slowest peer in it, clamped to [HedgeMin, HedgeMax] (HedgeDelay when none has figures). A
// peer whose packets are lost answers most calls at once and a few after a retransmission
// timeout of 200 ms or more: its own p90 lets the read go on without it at once, where the
// p99 of every peer's reads would wait out the stall those very calls feed it.
func (c *Coordinator) hedgeDelay(op *readOp) time.Duration {
	d := time.Duration(0)
	for i, t := range op.ts {
		if op.sent[i] && t.p != nil {
			v := t.p.tail.value()
			if v == 0 {
				return c.HedgeDelay()
			}
			d = max(d, v)
		}
	}
	if d == 0 {
		return c.HedgeDelay()
	}
	return min(max(d, c.cfg.HedgeMin), c.cfg.HedgeMax)
}

// Get reads key from ack of its from replicas and returns the newest
// version among the replies. found is false when no replica has the key or
// the newest version is a tombstone (then rec is that tombstone). ack and
// from of 0 mean the defaults. rec.Value is shared with read reconciliation: do not
// modify it.
func (c *Coordinator) Get(ctx context.Context, key []byte, ack, from int) (store.Record, bool, error) {
	start := time.Now()
	rec, found, err := c.get(ctx, key, ack, from)
	n := 0
	if found {
		n = len(rec.Value)
	}
	c.observe(OpGet, key, n, start, err)
	return rec, found, err
}

type readReply struct {
	i     int
	rec   store.Record
	found bool
	err   error
}

// readOp is the state of one read. The caller's goroutine owns it until the answer; after
// it (finish) the replies still in flight take it in turn, under mu.
type readOp struct {
	key      []byte
	token    uint64
	vid      ring.ViewID
	ts       []target
	replies  chan readReply
	got      []*readReply // by target; nil until answered
	sent     []bool       // by target: its call went out
	answered []bool       // by target: its call came back (answer or error)
	newest   store.Record
	any      bool  // some replica had a version
	next     int   // next target to launch
	deferred []int // targets passed over for their open breaker, launched only if needed
	ok       int
	inflight int
	errs     []error
	cc       *callCtx
	// mu: while detached is false, a reply goes to replies (deliver) for the caller's
	// goroutine; once the read has answered with calls still in flight (finish), detached,
	// and each late reply is taken by the call that brought it, under mu.
	mu       sync.Mutex
	detached bool
}

func (c *Coordinator) get(ctx context.Context, key []byte, ack, from int) (store.Record, bool, error) {
	v, ack, from, err := c.prepare(key, nil, ack, from)
	if err != nil {
		return store.Record{}, false, err
	}
	key = bytes.Clone(key) // calls and reconciliations outlive the answer
	token := ring.Token(key)
	op := &readOp{key: key, token: token, vid: v.ID(), ts: c.order(c.targets(v.ReadSet(token, from)))}
	op.replies = make(chan readReply, len(op.ts))
	op.got = make([]*readReply, len(op.ts))
	op.sent, op.answered = make([]bool, len(op.ts)), make([]bool, len(op.ts))
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
		timer := time.NewTimer(c.hedgeDelay(op))
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
			c.hedged(op)
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

// order sorts targets for a read, as Cassandra's dynamic snitch does: this node first, then
// peers with closed breakers by latency EWMA, then peers named gray (Gray: lossy, slow links,
// cut one way, flapping) by the same, then those with an open breaker; ties keep ring order.
// A gray peer stays a replica: it is asked when the others do not make ack, or on a hedge.
func (c *Coordinator) order(ts []target) []target {
	gray := c.grayPeers()
	rank := func(t target) int {
		switch {
		case t.p == nil:
			return 0
		case !t.p.br.allow():
			return 3
		case gray[t.id]:
			return 2
		}
		return 1
	}
	slices.SortStableFunc(ts, func(a, b target) int {
		ra, rb := rank(a), rank(b)
		if ra != rb {
			return ra - rb
		}
		if ra == 1 || ra == 2 {
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

// hedged tells Config.Calls of the peers whose calls had not come back when the hedge delay
// ran out.
func (c *Coordinator) hedged(op *readOp) {
	if c.cfg.Calls == nil || (op.next >= len(op.ts) && len(op.deferred) == 0) {
		return // nothing left to hedge to
	}
	for i, t := range op.ts {
		if op.sent[i] && !op.answered[i] && t.p != nil {
			c.cfg.Calls.ObserveHedge(t.id)
		}
	}
}

// send starts the read call to target i of op.
func (c *Coordinator) send(op *readOp, i int, needed bool) bool {
	t := op.ts[i]
	op.cc.acquire()
	if ar, ok := t.r.(asyncReader); ok && c.track() {
		// No goroutine waits for a peer's read: the batch stream's receiver completes it.
		cc, start := op.cc, time.Now()
		if ar.ReadAsync(cc.ctx, op.key, func(rec store.Record, found bool, err error) {
			defer c.wg.Done()
			cc.release()
			c.account(t, op.token, time.Since(start), err, true)
			c.deliver(op, readReply{i: i, rec: rec, found: found, err: callError(t, needed, err)})
		}) {
			op.sent[i] = true
			op.inflight++
			return true
		}
		c.wg.Done()
	}
	// A read that waits for its replica (this node's store: no network, and the caller's
	// goroutine must stay free to hedge past a slow disk) goes to an idle reader, else to a
	// goroutine of its own.
	select {
	case c.readers <- readCall{op, t, needed, i}:
		op.sent[i] = true
		op.inflight++
		return true
	default:
	}
	if !c.spawn(func() { c.callRead(op, t, needed, i) }) {
		op.cc.release()
		op.errs = append(op.errs, ErrClosed)
		op.next, op.deferred = len(op.ts), nil
		return false
	}
	op.sent[i] = true
	op.inflight++
	return true
}

// asyncReader is a replica that sends a read without a goroutine waiting for it (Remote), as
// asyncWriter does a write.
type asyncReader interface {
	ReadAsync(ctx context.Context, key []byte, done func(rec store.Record, found bool, err error)) bool
}

// readers is how many reader goroutines a coordinator keeps for the reads that wait for their
// replica: a GET on this node's own store then starts no goroutine while one is idle. Never
// queued behind one: a read finding none idle starts its own (a stuck disk holds every reader
// and the reads go on as they did). A reader handed a read runs once its caller waits, so
// under load many are taken at once: with 16, a 1-node GET -c64 still started 0.07
// goroutines per request; with 64, none (70 in 263k requests).
const readers = 64

// readCall is a read of target i of op, as send hands it to a reader.
type readCall struct {
	op     *readOp
	t      target
	needed bool
	i      int
}

// reader runs the reads handed to it (send) until c closes.
func (c *Coordinator) reader() {
	defer c.wg.Done()
	for {
		select {
		case r := <-c.readers:
			c.callRead(r.op, r.t, r.needed, r.i)
		case <-c.base.Done():
			return
		}
	}
}

func (c *Coordinator) callRead(op *readOp, t target, needed bool, i int) {
	start := time.Now()
	rec, found, err := t.r.Read(op.cc.ctx, op.key)
	op.cc.release()
	c.account(t, op.token, time.Since(start), err, true)
	c.deliver(op, readReply{i: i, rec: rec, found: found, err: callError(t, needed, err)})
}

// deliver hands a call's reply to op: to the caller's goroutine while the read has not
// answered (replies holds one reply per target, so this never blocks), else takes it here,
// and the last reply still in flight reconciles the replicas (finish).
func (c *Coordinator) deliver(op *readOp, r readReply) {
	op.mu.Lock()
	if !op.detached {
		op.replies <- r
		op.mu.Unlock()
		return
	}
	c.take(op, r)
	last := op.inflight == 0
	op.mu.Unlock()
	if last {
		c.reconcile(op)
	}
}

// take records one reply.
func (c *Coordinator) take(op *readOp, r readReply) {
	op.inflight--
	op.answered[r.i] = true
	if r.err != nil {
		op.errs = append(op.errs, r.err)
		if errors.Is(r.err, ErrRangeDamaged) {
			// Not an answer, but a replica that takes writes: read reconciliation gives it the
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

// finish ends op's read once it has answered: it takes the replies already delivered, and
// reconciles the replicas that answered with an older version or none once every call is
// back, at once when none is in flight, else in the last late reply's deliver. No goroutine
// waits for the late replies: each call's completion takes its own.
func (c *Coordinator) finish(op *readOp) {
	op.cc.release() // launches no more calls
	op.mu.Lock()
	// Every reply is sent under mu (deliver), so what is queued now is all there will be.
	for len(op.replies) > 0 {
		c.take(op, <-op.replies)
	}
	op.detached = op.inflight > 0
	done := !op.detached
	op.mu.Unlock()
	if done {
		c.reconcile(op)
	}
}
