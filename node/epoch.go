package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"ringkv/node/replica"
	"ringkv/proto/kvpb"
)

// ready is nil when the node serves client requests: it is not draining, a committed ring
// contains it, and its first connections to the ring's peers are made (see connected).
func (n *Node) ready() error {
	if n.draining.Load() {
		return errors.New("draining")
	}
	r := n.currentRing()
	if r == nil {
		return replica.ErrNotAdmitted
	}
	if _, ok := r.Member(n.cfg.ID); !ok {
		return fmt.Errorf("%w: not a member of the ring at epoch %d", replica.ErrNotAdmitted, r.Epoch())
	}
	return n.connected()
}

// problems are what keeps a node that serves from serving as it should: ranges for which it
// cannot reach a quorum of replicas (peers down or cut off), a clock off most peers by more
// than the bound, a full disk, a gray verdict on itself (gray: the verdicts drawn for the same
// answer, so that NodeInfo's problems and gray agree). /readyz reports them; /v0/status does
// not (the course's API needs it to say only that the node serves). Empty when healthy.
func (n *Node) problems(gray []*kvpb.GrayNode) []string {
	var out []string
	if err := n.st.DiskFull(); err != nil {
		out = append(out, err.Error())
	}
	if lost, total := n.coord.QuorumLoss(); lost > 0 {
		out = append(out, fmt.Sprintf("no quorum of replicas reachable for %d of %d ranges (unreachable: %s)",
			lost, total, strings.Join(n.coord.Unreachable(), ", ")))
	}
	if err := n.offsets.Check(); err != nil {
		out = append(out, err.Error())
	}
	if d := n.repairs.DamagedRanges(n.st); d > 0 {
		out = append(out, kvpb.DamagedRanges(d))
	}
	if stalled := n.stalledMoves(); len(stalled) > 0 {
		out = append(out, kvpb.StalledMoves(len(stalled), stalled[0]))
	}
	for _, g := range gray {
		if g.GetNode() == n.cfg.ID {
			out = append(out, kvpb.GrayLine(g))
		}
	}
	return out
}

// stalledMoves are the stalls of the moves this node receives (cluster.Mover's judgment).
func (n *Node) stalledMoves() []*kvpb.MoveStall {
	var out []*kvpb.MoveStall
	for _, p := range n.mover.Progress() {
		if p.Stall != nil {
			out = append(out, p.Stall)
		}
	}
	return out
}

// readyz is /readyz: ready, and without problems (a full disk among them: it keeps serving
// reads and /v0/status, but is not ready for the writes a balancer sends).
func (n *Node) readyz() error {
	if err := n.ready(); err != nil {
		// A node that awaits admission may already receive ranges: their stalls are said too.
		if stalled := n.stalledMoves(); len(stalled) > 0 {
			return fmt.Errorf("%w; %s", err, kvpb.StalledMoves(len(stalled), stalled[0]))
		}
		return err
	}
	if p := n.problems(n.coord.Gray()); len(p) > 0 {
		return errors.New(strings.Join(p, "; "))
	}
	return nil
}

// connectWait bounds how long a starting node reports itself not ready while its first
// connections to peers are still being made (a blackholed peer's first attempt ends after
// gRPC's minimum connect timeout, 1 s).
const connectWait = 5 * time.Second

// connected is nil once the node's first connection attempt to every peer of its ring is
// over (connected, or refused) and every peer it reaches has called it (Unheard), or
// connectWait after start: from then on a request that
// needs a peer that is up finds its connection ready, so a client that waits for /v0/status
// (or /readyz) and then writes with ack=N succeeds.
func (n *Node) connected() error {
	if n.warm.Load() {
		return nil
	}
	if time.Since(n.started) < connectWait {
		if un := n.coord.Unreached(); len(un) > 0 {
			return fmt.Errorf("%w: %s", replica.ErrConnecting, strings.Join(un, ", "))
		}
		// Its peers must reach it too: after a restart their connections to it wait out a
		// reconnect backoff (1 s or more) after its own to them are up.
		if un := n.coord.Unheard(); len(un) > 0 {
			return fmt.Errorf("%w: not yet reached by %s", replica.ErrConnecting, strings.Join(un, ", "))
		}
	}
	n.warm.Store(true)
	return nil
}

// WaitReady blocks until the node serves clients (see ready: admitted, not draining, its
// first connections to peers made) or ctx ends, as a client that polls /readyz would.
func (n *Node) WaitReady(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		err := n.ready()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// clockWarnEvery is how often the offset to one peer is logged while it stays above half the
// bound.
const clockWarnEvery = time.Minute

// sawClock records a peer's wall clock from a reply (hlc.Monitor) and warns, at most once a
// minute per peer, while the offset is above half the bound.
func (n *Node) sawClock(peer string, sent, received, remote time.Time) {
	if !n.offsets.Observe(peer, sent, received, remote) {
		return
	}
	now := time.Now()
	n.clockWarnMu.Lock()
	last := n.clockWarned[peer]
	if now.Sub(last) >= clockWarnEvery {
		n.clockWarned[peer] = now
	}
	n.clockWarnMu.Unlock()
	if now.Sub(last) >= clockWarnEvery {
		o := n.offsets.Offsets()[peer]
		n.logger.Warn("clock offset to a peer above half the bound", "peer", peer,
			"offset", o.Offset.Round(time.Millisecond), "uncertainty", o.Uncertainty.Round(time.Microsecond),
			"bound", n.cfg.MaxClockOffset)
	}
}

// epochWait bounds one catch-up wait for a newer epoch.
const epochWait = 10 * time.Second

// sawEpoch is told the ring epoch of every peer request and response. When a peer is ahead,
// one background waiter (bounded by epochWait) lets raft bring this node's ring up to it.
func (n *Node) sawEpoch(e uint64) {
	if e <= n.cl.Epoch() {
		return
	}
	for {
		cur := n.seenEpoch.Load()
		if e <= cur || n.seenEpoch.CompareAndSwap(cur, e) {
			break
		}
	}
	n.bgMu.RLock()
	defer n.bgMu.RUnlock()
	if n.bgCtx.Err() != nil || !n.catchingUp.CompareAndSwap(false, true) {
		return
	}
	n.bg.Go(func() {
		defer n.catchingUp.Store(false)
		target := n.seenEpoch.Load()
		ctx, cancel := context.WithTimeout(n.bgCtx, epochWait)
		defer cancel()
		if err := n.cl.WaitEpoch(ctx, target); err != nil && n.bgCtx.Err() == nil {
			n.logger.Warn("behind the cluster's ring epoch", "epoch", n.cl.Epoch(), "seen", target, "err", err)
		}
	})
}

func (n *Node) setHealth() {
	if n.health == nil {
		return
	}
	st := healthpb.HealthCheckResponse_SERVING
	if n.ready() != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	n.health.SetServingStatus("", st)
	n.health.SetServingStatus("ringkv.KV", st)
}

// watchRing keeps the health service in step with the ring (admission, removal) and with
// the first connections to peers (see connected), and logs epoch changes, until ctx ends.
func (n *Node) watchRing(ctx context.Context) {
	var last uint64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ch := n.cl.Watch()
		n.setHealth()
		var connecting <-chan time.Time
		if !n.warm.Load() {
			connecting = tick.C
		}
		if e := n.epoch(); e != last {
			if last != 0 || e > 1 {
				n.logger.Info("ring epoch", "epoch", e)
			}
			last = e
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-connecting:
		}
	}
}
