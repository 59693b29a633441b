package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"ringkv/node/replica"
)

// ready is nil when the node serves client requests: it is not draining and a committed
// ring contains it.
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
	return nil
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

// watchRing keeps the health service in step with the ring (admission, removal) and logs
// epoch changes, until ctx ends.
func (n *Node) watchRing(ctx context.Context) {
	var last uint64
	for {
		ch := n.cl.Watch()
		n.setHealth()
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
		}
	}
}
