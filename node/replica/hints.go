package replica

import (
	"context"
	"errors"
	"time"

	"ringkv/node/hints"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/rpcerr"
)

// Hinted handoff: when a write's call to a peer fails (down, timed out, breaker open), the
// coordinator keeps the record as a hint for that peer and hands it over once the peer answers
// again, so a node that was down catches up on the writes it missed without waiting for reads
// or a repair. Hints do not count towards a write's acks (Cassandra's rule): a write that got
// fewer than ack acknowledgements still fails.
//
// Hints are durable (Config.Hints, a hints.Log in the node's data directory): a hint for a
// replica known to have missed the write when the write is answered — passed over for its open
// breaker, without a connection, or whose call already failed — is on disk before the write is
// acknowledged, and survives a crash of the coordinator (with --sync-writes, a power loss).
// A call still in flight at the answer leaves its hint when it fails, after the answer, as in
// Cassandra: a crash in that window leaves the write to repair.
//
// They are handed over in the order they were added, one call at a time per peer and paced to
// Config.HintRate bytes per second, so a large backlog does not crowd out client traffic: at
// once when a peer's breaker closes or its connection turns ready, and every HintInterval. A
// hint is removed once the peer took it. One the peer refuses as routed by a stale view (it no
// longer replicates the key after a ring change) is written instead to the key's replicas in
// the current view, with the same timestamp, so it is a no-op where it already landed; so are
// the hints of a peer that left the ring. The log's bounds (hints.Config.MaxAge and
// MaxBytes) drop hints and count them: repair covers the writes they carried.

// HintLog is where a Coordinator keeps its hints: hints.Log. Safe for concurrent use; the
// Coordinator calls it from write paths and from one handoff goroutine, and stops calling it
// when Close returns.
type HintLog interface {
	// Add stores a hint of rec for peer; it returns once the hint is durable.
	Add(peer string, key []byte, rec store.Record) error
	// Peers is the peers with hints.
	Peers() []string
	// Next returns up to n of peer's oldest hints in order, without removing them.
	Next(peer string, n int) ([]hints.Hint, error)
	// Remove deletes hints that were handed over; Drop those the peer refuses for good.
	Remove(hs []hints.Hint) error
	Drop(hs []hints.Hint) error
	// Expire drops the hints older than the log's age bound.
	Expire() (int, error)
	// Queues describes every peer's queue.
	Queues() []hints.Queue
	// Dropped counts the hints dropped by a bound.
	Dropped() uint64
}

var _ HintLog = (*hints.Log)(nil)

// HintStats is what the coordinator holds for unreachable peers.
type HintStats struct {
	// Pending is hints held per peer.
	Pending map[string]int
	// Bytes is their size; Dropped counts hints dropped by a bound (bytes, age, a full disk),
	// Delivered those handed over.
	Bytes              int
	Dropped, Delivered uint64
	// Queues is each peer's queue.
	Queues []hints.Queue
}

// Hints reports the hints the coordinator holds.
func (c *Coordinator) Hints() HintStats {
	st := HintStats{Pending: map[string]int{}}
	if c.hints == nil {
		return st
	}
	st.Queues = c.hints.Queues()
	for _, q := range st.Queues {
		if q.Count > 0 {
			st.Pending[q.Peer] = int(q.Count)
		}
		st.Bytes += int(q.Bytes)
		st.Dropped += q.Dropped
		st.Delivered += q.Delivered
	}
	st.Dropped = max(st.Dropped, c.hints.Dropped())
	return st
}

// hintable reports whether a failed call to a peer should leave a hint: the peer did not take
// the write for want of being reachable, not because it refused it.
func (c *Coordinator) hintable(t target, err error) bool {
	// A peer that refused the write (rpcerr.Alive: a stale view, a bad request, a full disk, a
	// clock offset) would refuse the hint too; hints for a full peer would only grow.
	return t.p != nil && err != nil && c.base.Err() == nil && !rpcerr.Alive(err)
}

// keepHint stores a hint for t after a failed write call. A hint that cannot be stored (a
// full disk, a closed log) is counted as dropped by the log: repair covers it.
func (c *Coordinator) keepHint(t target, key []byte, rec store.Record) {
	if c.hints == nil {
		return
	}
	if err := c.hints.Add(t.id, key, rec); err != nil {
		if c.cfg.Logger != nil && c.base.Err() == nil {
			c.cfg.Logger.Warn("hint not kept", "peer", t.id, "err", err)
		}
		return
	}
	if h, ok := c.obs.(interface{ Hint() }); ok {
		h.Hint()
	}
}

// kickHints asks the handoff goroutine for a round now (a peer answers again).
func (c *Coordinator) kickHints() {
	select {
	case c.hintKick <- struct{}{}:
	default:
	}
}

// hintBatch is how many hints one handoff round reads for a peer at a time.
const hintBatch = 256

// handoffLoop drops expired hints and hands hints over every HintInterval and when kicked,
// until Close.
func (c *Coordinator) handoffLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.HintInterval)
	defer t.Stop()
	for {
		select {
		case <-c.base.Done():
			return
		case <-t.C:
		case <-c.hintKick:
		}
		if _, err := c.hints.Expire(); err != nil && c.cfg.Logger != nil && c.base.Err() == nil {
			c.cfg.Logger.Warn("expire hints", "err", err)
		}
		c.handoff()
	}
}

// handoff sends each peer with hints its hints, while its breaker lets calls through and it
// takes them.
func (c *Coordinator) handoff() {
	pending := c.hints.Peers()
	if len(pending) == 0 {
		// Nothing to hand over, and no view asked for: the view function may not be usable
		// before the node has started serving.
		return
	}
	v := c.view()
	if v == nil || v.Current == nil {
		return
	}
	members := map[string]ring.Member{}
	for _, r := range []*ring.Ring{v.Current, v.Next} {
		if r != nil {
			for _, m := range r.Members() {
				members[m.ID] = m
			}
		}
	}
	for _, id := range pending {
		if c.base.Err() != nil {
			return
		}
		m, ok := members[id]
		if !ok {
			// The peer left the ring: its hints go to the keys' current replicas.
			for c.base.Err() == nil {
				hs, err := c.hints.Next(id, hintBatch)
				if err != nil || len(hs) == 0 {
					break
				}
				for _, h := range hs {
					c.pace(h)
					c.rehome(h)
				}
				if c.hints.Remove(hs) != nil {
					break
				}
			}
			continue
		}
		ts := c.targets([]ring.Member{m})
		c.handOver(ts[0])
	}
}

// handOver sends t its hints in order until they run out or a call fails.
func (c *Coordinator) handOver(t target) {
	for c.base.Err() == nil {
		if c.admit(t) != nil {
			return
		}
		hs, err := c.hints.Next(t.id, hintBatch)
		if err != nil || len(hs) == 0 {
			return
		}
		vid := c.view().ID()
		done := hs[:0:0]
		failed := false
		for _, h := range hs {
			if failed = !c.pace(h); failed {
				break
			}
			ctx, cancel := context.WithTimeout(c.base, c.cfg.ReplicaTimeout)
			start := time.Now()
			_, err := t.r.Write(ctx, h.Key, h.Record, vid)
			cancel()
			c.account(t, ring.Token(h.Key), time.Since(start), err, false)
			switch {
			case err == nil:
				done = append(done, h)
			case errors.Is(err, ErrStaleView):
				c.rehome(h)
				done = append(done, h)
			case errors.Is(err, ErrInvalidArgument):
				// Refused for what it is, not for where or when: kept, it would stop the queue
				// for good. Dropped and counted; repair compares what the replicas hold.
				failed = c.hints.Drop([]hints.Hint{h}) != nil
			default:
				failed = true
			}
			if failed {
				break
			}
		}
		if err := c.hints.Remove(done); err != nil || failed {
			return
		}
	}
}

// pace waits until handing h over keeps the handoff within HintRate; false when the
// coordinator closes meanwhile.
func (c *Coordinator) pace(h hints.Hint) bool {
	if c.cfg.HintRate <= 0 {
		return c.base.Err() == nil
	}
	now := time.Now()
	if c.hintNext.Before(now) {
		c.hintNext = now
	}
	n := len(h.Key) + len(h.Record.Value) + 32
	c.hintNext = c.hintNext.Add(time.Duration(float64(n) / float64(c.cfg.HintRate) * float64(time.Second)))
	if d := c.hintNext.Sub(now); d > time.Millisecond {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-c.base.Done():
			return false
		case <-tm.C:
		}
	}
	return c.base.Err() == nil
}

// rehome writes a hint to its key's replicas in the current view (one ack is enough: it is
// a copy of a write that was already acknowledged or failed). The replicas it misses get
// hints of their own.
func (c *Coordinator) rehome(h hints.Hint) {
	v := c.view()
	if v == nil || v.Current == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.base, c.cfg.ReplicaTimeout)
	defer cancel()
	_ = c.writeIn(ctx, v, h.Key, h.Record, 1, v.Current.Replicas())
}
