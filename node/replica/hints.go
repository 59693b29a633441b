package replica

import (
	"context"
	"errors"
	"sync"
	"time"

	"ringkv/node/hlc"
	"ringkv/node/ring"
	"ringkv/node/store"
)

// Hinted handoff: when a write's call to a peer fails (down, timed out, breaker open), the
// coordinator keeps the record as a hint for that peer and hands it over once the peer answers
// again, so a node that was down catches up on the writes it missed without waiting for reads
// to repair them. Hints do not count towards a write's acks (Cassandra's rule): a write that
// got fewer than ack acknowledgements still fails.
//
// Hints live in the coordinator's memory, bounded by Config.HintBytes (the oldest go first
// when full): a coordinator that restarts loses its hints, and read repair remains the backstop
// for those. A hint the peer refuses as routed by a stale view (it no longer replicates the key
// after a ring change) is written instead to the key's replicas in the current view, with the
// same timestamp, so it is a no-op where it already landed.

type hint struct {
	key []byte
	rec store.Record
}

func (h hint) size() int { return len(h.key) + len(h.rec.Value) + 64 }

// hintQueue is the hints for one peer, oldest first.
type hintQueue struct {
	hints []hint
}

// hintStore is every peer's hints. Safe for concurrent use.
type hintStore struct {
	max int // bytes

	mu        sync.Mutex
	peers     map[string]*hintQueue
	bytes     int
	dropped   uint64
	delivered uint64
}

func newHintStore(maxBytes int) *hintStore {
	return &hintStore{max: maxBytes, peers: map[string]*hintQueue{}}
}

// add keeps a hint for peer, evicting the oldest hints of the peer with the most when full.
func (s *hintStore) add(peer string, h hint) {
	if s.max <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue(peer)
	q.hints = append(q.hints, h)
	s.bytes += h.size()
	for s.bytes > s.max {
		var big *hintQueue
		for _, q := range s.peers {
			if big == nil || len(q.hints) > len(big.hints) {
				big = q
			}
		}
		if big == nil || len(big.hints) == 0 {
			break
		}
		s.bytes -= big.hints[0].size()
		big.hints[0] = hint{}
		big.hints = big.hints[1:]
		s.dropped++
	}
}

// queue is peer's queue, created when missing. Callers hold mu.
func (s *hintStore) queue(peer string) *hintQueue {
	q := s.peers[peer]
	if q == nil {
		q = &hintQueue{}
		s.peers[peer] = q
	}
	return q
}

// take removes and returns up to n of peer's oldest hints.
func (s *hintStore) take(peer string, n int) []hint {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.peers[peer]
	if q == nil {
		return nil
	}
	n = min(n, len(q.hints))
	out := make([]hint, n)
	copy(out, q.hints)
	clear(q.hints[:n])
	q.hints = q.hints[n:]
	for _, h := range out {
		s.bytes -= h.size()
	}
	if len(q.hints) == 0 {
		delete(s.peers, peer)
	}
	return out
}

// putBack returns hints that could not be handed over to the front of peer's queue.
func (s *hintStore) putBack(peer string, hs []hint) {
	if len(hs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue(peer)
	q.hints = append(append([]hint(nil), hs...), q.hints...)
	for _, h := range hs {
		s.bytes += h.size()
	}
}

// pending is the peers with hints.
func (s *hintStore) pending() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.peers))
	for p := range s.peers {
		out = append(out, p)
	}
	return out
}

// HintStats is what the coordinator holds for unreachable peers.
type HintStats struct {
	// Pending is hints held per peer.
	Pending map[string]int
	// Bytes is their size; Dropped counts hints evicted because the store was full, Delivered
	// those handed over.
	Bytes              int
	Dropped, Delivered uint64
}

// Hints reports the hints the coordinator holds.
func (c *Coordinator) Hints() HintStats {
	s := c.hints
	s.mu.Lock()
	defer s.mu.Unlock()
	st := HintStats{Pending: map[string]int{}, Bytes: s.bytes, Dropped: s.dropped, Delivered: s.delivered}
	for p, q := range s.peers {
		st.Pending[p] = len(q.hints)
	}
	return st
}

// hintable reports whether a failed call to a peer should leave a hint: the peer did not take
// the write for want of being reachable, not because it refused it.
func (c *Coordinator) hintable(t target, err error) bool {
	return t.p != nil && err != nil && c.base.Err() == nil &&
		!errors.Is(err, ErrStaleView) && !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrNotAdmitted) &&
		!errors.Is(err, hlc.ErrClockOffset) &&
		!errors.Is(err, store.ErrDiskFull) // a full peer refuses; hints for it would only grow
}

// keepHint stores a hint for t after a failed write call.
func (c *Coordinator) keepHint(t target, key []byte, rec store.Record) {
	c.hints.add(t.id, hint{key: key, rec: rec})
	if h, ok := c.obs.(interface{ Hint() }); ok {
		h.Hint()
	}
}

// hintBatch is how many hints one handoff round sends to a peer before it looks at the others.
const hintBatch = 256

// handoffLoop hands hints over every HintInterval until Close.
func (c *Coordinator) handoffLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.HintInterval)
	defer t.Stop()
	for {
		select {
		case <-c.base.Done():
			return
		case <-t.C:
			c.handoff()
		}
	}
}

// handoff sends each peer with hints its hints, while its breaker lets calls through and it
// takes them.
func (c *Coordinator) handoff() {
	pending := c.hints.pending()
	if len(pending) == 0 {
		// Nothing to hand over, and no view asked for: the view function may not be usable
		// before the node has started serving (a hint exists only after a write was served).
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
		m, ok := members[id]
		if !ok {
			// The peer left the ring: its hints go to the keys' current replicas.
			for hs := c.hints.take(id, hintBatch); len(hs) > 0 && c.base.Err() == nil; hs = c.hints.take(id, hintBatch) {
				for _, h := range hs {
					c.rehome(h)
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
		hs := c.hints.take(t.id, hintBatch)
		if len(hs) == 0 {
			return
		}
		vid := c.view().ID()
		for i, h := range hs {
			ctx, cancel := context.WithTimeout(c.base, c.cfg.ReplicaTimeout)
			start := time.Now()
			_, err := t.r.Write(ctx, h.key, h.rec, vid)
			cancel()
			c.account(t, time.Since(start), err, false)
			switch {
			case err == nil:
				c.hints.mu.Lock()
				c.hints.delivered++
				c.hints.mu.Unlock()
			case errors.Is(err, ErrStaleView):
				c.rehome(h)
			default:
				c.hints.putBack(t.id, hs[i:])
				return
			}
		}
	}
}

// rehome writes a hint to its key's replicas in the current view (one ack is enough: it is
// a copy of a write that was already acknowledged or failed). Failures drop it: read repair
// is the backstop.
func (c *Coordinator) rehome(h hint) {
	v := c.view()
	if v == nil || v.Current == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.base, c.cfg.ReplicaTimeout)
	defer cancel()
	_ = c.writeIn(ctx, v, h.key, h.rec, 1, v.Current.Replicas())
}
