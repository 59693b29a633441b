// The write path: Put and Delete stamp a record and send it to the key's write set, passing
// over replicas with an open breaker while the others can still reach ack.

package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"ringkv/node/ring"
	"ringkv/node/store"
)

// Put writes value under key on ack replicas (from of them, plus pending
// ones during a ring change) and returns the version's timestamp. ack and
// from of 0 mean the defaults.
func (c *Coordinator) Put(ctx context.Context, key, value []byte, ack, from int) (uint64, error) {
	if value == nil {
		value = []byte{}
	}
	start := time.Now()
	ts, err := c.write(ctx, key, value, false, ack, from)
	c.observe(OpPut, key, len(value), start, err)
	return ts, err
}

// Delete writes a tombstone for key, like Put.
func (c *Coordinator) Delete(ctx context.Context, key []byte, ack, from int) (uint64, error) {
	start := time.Now()
	ts, err := c.write(ctx, key, nil, true, ack, from)
	c.observe(OpDelete, key, 0, start, err)
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
	token := ring.Token(key)
	natural, pending := v.WriteSet(token, from)
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
		if aw, ok := t.r.(asyncWriter); ok {
			// No goroutine waits for a peer's write: the batch stream's receiver completes it.
			if !c.track() {
				cc.release()
				return false
			}
			start := time.Now()
			if aw.WriteAsync(cc.ctx, key, rec, vid, func(_ bool, err error) {
				c.wroteAsync(cc, t, needed, key, token, rec, start, err, replies)
			}) {
				inflight++
				return true
			}
			c.wg.Done()
		}
		if !c.spawn(func() { c.callWrite(cc, t, needed, key, token, rec, vid, replies) }) {
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
			if err := c.ownDiskFull(errs); err != nil {
				return err
			}
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

// ownDiskFull is this node's "disk full: …" when a write failed because its own volume
// crossed the reserve after the write's check at its start (Writable) and before its store's:
// the client gets the answer the writes after it get, not a failed replica (a CI run under
// two spin loops saw "not enough replicas: 0 of 1 acknowledged, 1 needed: replica n1: local
// write: disk full: …"). Nil otherwise.
func (c *Coordinator) ownDiskFull(errs []error) error {
	if c.cfg.Writable == nil || !slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, store.ErrDiskFull) }) {
		return nil
	}
	return c.cfg.Writable()
}

// asyncWriter is a replica that sends a write without a goroutine waiting for it (Remote).
// WriteAsync returns false when it cannot (then done never runs); done runs once, must not
// block, and may run before WriteAsync returns.
type asyncWriter interface {
	WriteAsync(ctx context.Context, key []byte, rec store.Record, vid ring.ViewID, done func(applied bool, err error)) bool
}

// wroteAsync is callWrite's tail for a write sent by WriteAsync, run where it completes; the
// call was counted by track. A hint, when due, is stored in a goroutine of its own: the
// completing goroutine is a stream's receiver, which must not wait for a disk.
func (c *Coordinator) wroteAsync(cc *callCtx, t target, needed bool, key []byte, token uint64, rec store.Record, start time.Time, err error, replies chan<- writeReply) {
	defer c.wg.Done()
	cc.release()
	c.account(t, token, time.Since(start), err, false)
	if c.hintable(t, err) && !c.spawn(func() { c.keepHint(t, key, rec) }) {
		c.keepHint(t, key, rec)
	}
	replies <- writeReply{err: callError(t, needed, err)}
}

func (c *Coordinator) callWrite(cc *callCtx, t target, needed bool, key []byte, token uint64, rec store.Record, vid ring.ViewID, replies chan<- writeReply) {
	start := time.Now()
	_, err := t.r.Write(cc.ctx, key, rec, vid)
	cc.release()
	c.account(t, token, time.Since(start), err, false)
	if c.hintable(t, err) {
		c.keepHint(t, key, rec)
	}
	replies <- writeReply{err: callError(t, needed, err)}
}
