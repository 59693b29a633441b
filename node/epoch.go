package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"ringkv/node/replica"
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

// readyz is /readyz: ready, and with room on the data volume (a full disk keeps serving
// reads and /v0/status, but is not ready for the writes a balancer sends).
func (n *Node) readyz() error {
	if err := n.ready(); err != nil {
		return err
	}
	return n.st.DiskFull()
}

// connectWait bounds how long a starting node reports itself not ready while its first
// connections to peers are still being made (a blackholed peer's first attempt ends after
// gRPC's minimum connect timeout, 1 s).
const connectWait = 5 * time.Second

// connected is nil once the node's first connection attempt to every peer of its ring is
// over (connected, or refused), or connectWait after start: from then on a request that
// needs a peer that is up finds its connection ready, so a client that waits for /v0/status
// (or /readyz) and then writes with ack=N succeeds.
func (n *Node) connected() error {
	if n.warm.Load() {
		return nil
	}
	if un := n.coord.Unreached(); len(un) > 0 && time.Since(n.started) < connectWait {
		return fmt.Errorf("%w: %s", replica.ErrConnecting, strings.Join(un, ", "))
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
