// Peer health: each peer's circuit breaker and latency, the goroutine that follows its
// connection and probes it, and what the node reports of its peers (Breakers, Unreachable,
// QuorumLoss, Unreached).

package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"ringkv/proto/rpcerr"
)

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
	slices.SortFunc(out, func(a, b Breaker) int { return cmp.Compare(a.Peer, b.Peer) })
	return out
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
	p = &peer{br: newBreaker(c.cfg.BreakerFailures, c.cfg.BreakerSlowSpell), tail: newQuantile(0.9)}
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
	epoch := p.br.epoch() // read before the state: a READY seen then is no sign of life after a later opening
	state := t.State()
	moved := false // the connection has left its first idle state
	var probed time.Time
	prev := state
	flaps := c.flapped.Load()
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
			if p.br.reachable(epoch) {
				c.logPeer(id, "connection ready again")
				c.kickHints()
			}
		case connectivity.TransientFailure:
			p.contacted.Store(true)
			if c.setDown(p, true) {
				flaps++ // its own: this peer needs no probe for it
			}
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
		// And at once when the connection (re)turns ready: the Links call is how the peer learns
		// that this node reaches it again (Unheard). At once when it is lost: a peer that stopped
		// refuses the reconnect, and its departure counts now, not at the next probe. And at once
		// when a departure or comeback of any peer was counted here: the Links call tells this
		// peer, whose view the verdict on a flapping node waits for (gray.go).
		up := state == connectivity.Ready && prev != connectivity.Ready
		lost := state != connectivity.Ready && prev == connectivity.Ready
		prev = state
		flapped := c.flapped.Load() != flaps
		if every := c.cfg.HealthInterval; up || lost || flapped || !p.br.allow() || time.Since(probed) >= every {
			flaps = c.flapped.Load()
			probed = time.Now()
			asked := p.br.epoch()
			ctx, cancel := context.WithTimeout(c.base, c.cfg.ProbeTimeout)
			err := c.probe(ctx, id, p, r, t)
			cancel()
			if c.base.Err() != nil {
				return
			}
			if c.setDown(p, err != nil) {
				flaps++
			}
			if err == nil && p.br.reachable(asked) {
				c.logPeer(id, "answered a probe")
				c.kickHints()
			}
		}
		ctx, cancel := context.WithTimeout(c.base, c.cfg.ProbeInterval)
		t.WaitForStateChange(ctx, state)
		cancel()
		epoch = p.br.epoch()
		state = t.State()
	}
}

// probe asks the peer whether it is there: by swapping link views with it (gray.go) when
// its Replica can, else by a health check. The outcome counts on the peer's link, and so do
// the TCP segments sent to it and retransmitted since the last probe (Config.LinkCounts).
func (c *Coordinator) probe(ctx context.Context, id string, p *peer, r Replica, t Transport) error {
	if c.cfg.LinkCounts != nil {
		if v := c.view(); v != nil && v.Current != nil {
			if m, ok := v.Current.Member(id); ok {
				segs, re := c.cfg.LinkCounts(m.Addr)
				p.link.tcp(c.cfg.Now(), segs, re)
			}
		}
	}
	start := time.Now()
	var err error
	ctx, cancel := untilRefused(ctx, t)
	defer cancel()
	if l, ok := r.(linker); ok && !p.noLinks.Load() {
		t.Wake()
		err = c.exchange(ctx, l)
		if status.Code(err) == codes.Unimplemented {
			p.noLinks.Store(true)
			err = nil
		} else if err != nil && !down(err) {
			err = nil // it answered, if only to refuse
		}
	} else {
		err = t.Probe(ctx)
	}
	p.link.observe(c.cfg.Now(), time.Since(start), err != nil)
	return err
}

// untilRefused returns ctx, cancelled as well once t's connection fails (TransientFailure):
// a probe waits for the connection (WaitForReady), and a peer that is gone refuses it at
// once, so the probe ends then rather than at its timeout. Its goroutine ends with ctx.
func untilRefused(ctx context.Context, t Transport) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		for st := t.State(); st != connectivity.TransientFailure; st = t.State() {
			if !t.WaitForStateChange(ctx, st) {
				return
			}
		}
		cancel()
	}()
	return ctx, cancel
}

// down reports whether a probe's error means the peer did not answer.
func down(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// setDown records whether the peer answers now; its departures and comebacks count on its
// link (flapping, gray.go), and in Coordinator.flapped: whether this one counted.
func (c *Coordinator) setDown(p *peer, d bool) bool {
	p.down.Store(d)
	if p.link.seen(c.cfg.Now(), d) {
		c.flapped.Add(1)
		return true
	}
	return false
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

// account feeds the outcome of one call to t, for the key at token, into its breaker and
// latency, and tells Config.Calls.
func (c *Coordinator) account(t target, token uint64, d time.Duration, err error, read bool) {
	if t.p == nil {
		return // this node's store: its writes are timed by Local (ObserveStoreWrite)
	}
	calls := c.cfg.Calls
	if calls != nil && c.base.Err() == nil {
		seen := err
		if err != nil && rpcerr.Alive(err) {
			seen = nil // a refusal: the peer answered
		}
		calls.ObserveCall(t.id, token, read, d, seen)
	}
	if c.base.Err() == nil {
		t.p.link.observe(c.cfg.Now(), d, err != nil && !rpcerr.Alive(err))
	}
	switch {
	case err == nil:
		t.p.br.success()
		t.p.latency.observe(d)
		t.p.tail.observe(d)
		if read {
			c.readP99.observe(d)
		}
	case c.base.Err() != nil:
		// cancelled by Close: says nothing about the peer
	case rpcerr.Alive(err):
		// The peer answered with a refusal (e.g. not a replica of the key while it catches up
		// on a ring change, a full disk, a clock too far behind): it is alive, and its breaker
		// must not open on a healthy node. The error table says which answers are refusals.
		t.p.br.success()
	default:
		if t.p.br.failure(c.cfg.Now(), dead(err), strings.ReplaceAll(err.Error(), "\n", "; ")) && calls != nil {
			calls.ObserveBreakerTrip(t.id)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.p.latency.observe(c.cfg.ReplicaTimeout)
			t.p.tail.observe(c.cfg.ReplicaTimeout)
		}
	}
}

// ObserveStoreWrite records one write that this node's store applied and how long it took,
// whoever coordinated it (replica.LocalTimed): its own link, which a slow disk slows (gray.go).
func (c *Coordinator) ObserveStoreWrite(d time.Duration, err error) {
	if c.base.Err() == nil {
		c.selfLink.observe(c.cfg.Now(), d, err != nil && !rpcerr.Alive(err))
	}
}

// dead reports whether a failed call shows the peer is not there (refused,
// reset, no connection: gRPC Unavailable) rather than slow or failing.
func dead(err error) bool {
	if st, ok := status.FromError(err); ok {
		return st.Code() == codes.Unavailable
	}
	return errors.Is(err, ErrReplicaUnavailable)
}
