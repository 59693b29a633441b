package test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"ringkv/internal/replicatest"
	"ringkv/proto/kvpb"
)

// The repair scenarios, with kvnode processes: a replica that missed writes
// while down, whose coordinator's hints died with a kill -9, holds every acknowledged key
// after a repair, checked on each node's own store (Replica.StreamRange of the whole ring,
// a local scan), never by client reads of those keys.

// heldBy scans p's own store: every record it holds, by key (value, or "" for a tombstone).
func (c *tcluster) heldBy(p *proc) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return replicatest.Held(ctx, c.conn(p))
}

// missingOn counts the acknowledged keys p does not hold with their value.
func (c *tcluster) missingOn(p *proc, acked map[string]string) (int, error) {
	held, err := c.heldBy(p)
	if err != nil {
		return 0, err
	}
	n := 0
	for k, v := range acked {
		if held[k] != v {
			n++
		}
	}
	return n, nil
}

// waitUp waits until p answers NodeInfo at the ring's epoch (ack=3 probes cannot tell while
// another node is down).
func (c *tcluster) waitUp(p *proc) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, p.id+" up", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		info, err := c.admin(p).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
		if err == nil && info.GetEpoch() == 0 {
			err = errors.New("no ring yet")
		}
		return err
	})
}

// missedWrites plays the lost-hints scenario up to the repair: 3 nodes, N=3; n3 stopped; 2000
// ack=2 PUTs through n1 (the acknowledged ones are returned); n1 killed with -9 and
// restarted; n3 restarted.
func missedWrites(t *testing.T, flags []string) (*tcluster, map[string]string) {
	c := startClusterFlags(t, 3, 0, flags)
	n1, n3 := c.node("n1"), c.node("n3")
	c.kill(n3)
	acked := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 2000; i += 8 {
				key := fmt.Sprintf("r%04d", i)
				val := fmt.Sprintf("value-%d", i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.kv(n1).Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte(val), Ack: 2, From: 3})
				cancel()
				if err == nil {
					mu.Lock()
					acked[key] = val
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(acked) < 1900 {
		t.Fatalf("%d of 2000 ack=2 writes acknowledged with one node down; want nearly all", len(acked))
	}
	c.kill(n1)
	c.restart(n1)
	c.waitUp(n1)
	c.restart(n3)
	c.waitUp(n3)
	missing, err := c.missingOn(n3, acked)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d acknowledged writes; n3 misses %d of them before any repair", len(acked), missing)
	return c, acked
}

// checkEveryNode fails unless every node holds every acknowledged key with its value.
func (c *tcluster) checkEveryNode(acked map[string]string) {
	c.t.Helper()
	for _, p := range c.nodes {
		missing, err := c.missingOn(p, acked)
		if err != nil {
			c.t.Fatalf("scan %s: %v", p.id, err)
		}
		if missing > 0 {
			c.t.Errorf("%s misses %d of %d acknowledged keys", p.id, missing, len(acked))
		}
	}
}

// TestRepairAfterKillNine: after Admin.StartRepair (what kvctl repair calls) every node holds
// every acknowledged key.
func TestRepairAfterKillNine(t *testing.T) {
	t.Parallel()
	c, acked := missedWrites(t, []string{"--repair-interval", "0"})
	n2 := c.node("n2")
	admin := c.admin(n2)
	var plan *kvpb.RepairPlan
	// The restarted nodes' peers may take a moment to reconnect: a refusal for a replica
	// that does not answer yet is retried.
	waitFor(t, 30*time.Second, "repair started", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		plan, err = admin.StartRepair(ctx, &kvpb.RepairRequest{})
		return err
	})
	t.Logf("repair %d: %d ranges, %d pairs, est %d keys", plan.GetId(), len(plan.GetRanges()), len(plan.GetPairs()), plan.GetEstKeys())
	var p *kvpb.RepairProgress
	waitFor(t, 120*time.Second, "repair done", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		p, err = admin.RepairStatus(ctx, &kvpb.RepairStatusRequest{})
		if err != nil {
			return err
		}
		if p.GetState() == kvpb.RepairState_REPAIR_STATE_RUNNING {
			return fmt.Errorf("running: %d of %d ranges", p.GetRangesDone(), p.GetRangesTotal())
		}
		return nil
	})
	if p.GetState() != kvpb.RepairState_REPAIR_STATE_DONE {
		t.Fatalf("repair ended %s: %s", p.GetState(), p.GetError())
	}
	for _, pr := range p.GetPairs() {
		t.Logf("pair %s/%s: %d of %d leaves mismatched, %d keys to %s, %d to %s, %d bytes",
			pr.GetA(), pr.GetB(), pr.GetLeavesMismatched(), pr.GetLeavesCompared(), pr.GetKeysToA(), pr.GetA(), pr.GetKeysToB(), pr.GetB(), pr.GetBytesStreamed())
	}
	c.checkEveryNode(acked)
	for _, q := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := c.admin(q).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
		cancel()
		if err != nil || info.GetLastRepairedUnix() == 0 {
			t.Errorf("%s: last_repaired_unix %d (err %v), want set after a full repair", q.id, info.GetLastRepairedUnix(), err)
		}
	}
}

// TestBackgroundRepairAfterKillNine: with --repair-interval 2s and no one asking, the nodes
// converge by themselves.
func TestBackgroundRepairAfterKillNine(t *testing.T) {
	t.Parallel()
	c, acked := missedWrites(t, []string{"--repair-interval", "2s"})
	waitFor(t, 120*time.Second, "every node holds every acknowledged key", func() error {
		for _, p := range c.nodes {
			missing, err := c.missingOn(p, acked)
			if err != nil {
				return err
			}
			if missing > 0 {
				return fmt.Errorf("%s misses %d keys", p.id, missing)
			}
		}
		return nil
	})
	c.checkEveryNode(acked)
}

// TestRepairUnderLoad: a repair runs while writers and quorum readers go on; they keep
// succeeding, and nothing acknowledged (before, while a node was down, or during the repair)
// is lost.
func TestRepairUnderLoad(t *testing.T) {
	long(t)
	t.Parallel()
	c := startClusterFlags(t, 3, 0, []string{"--repair-interval", "0"})
	const prior, size = 3000, 200
	c.load(c.nodes, prior, size, 8)
	n3 := c.node("n3")
	c.kill(n3)
	up := c.nodes[:2]
	tr := c.startTraffic(up, 4, prior, size)
	waitFor(t, 30*time.Second, "writes while n3 is down", func() error {
		if n := tr.count(); n < 500 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	downAcked := tr.finish(t)
	c.restart(n3)
	c.waitUp(n3)
	tr = c.startTraffic(c.nodes, 4, prior, size)
	admin := c.admin(c.node("n1"))
	waitFor(t, 30*time.Second, "repair started", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := admin.StartRepair(ctx, &kvpb.RepairRequest{RateBytes: 1 << 20})
		return err
	})
	var p *kvpb.RepairProgress
	waitFor(t, 180*time.Second, "repair done", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		p, err = admin.RepairStatus(ctx, &kvpb.RepairStatusRequest{})
		if err == nil && p.GetState() == kvpb.RepairState_REPAIR_STATE_RUNNING {
			err = fmt.Errorf("running: %d of %d ranges", p.GetRangesDone(), p.GetRangesTotal())
		}
		return err
	})
	duringAcked := tr.finish(t)
	if p.GetState() != kvpb.RepairState_REPAIR_STATE_DONE {
		t.Fatalf("repair ended %s: %s", p.GetState(), p.GetError())
	}
	if tr.errors() > len(duringAcked)/100 {
		t.Errorf("%d errors beside %d acknowledged writes during the repair; want under 1%%", tr.errors(), len(duringAcked))
	}
	// The writes n3 missed are on every node now, by the repair alone.
	c.checkEveryNode(downAcked)
	all := map[string]string{}
	for k, v := range downAcked {
		all[k] = v
	}
	for k, v := range duringAcked {
		all[k] = v
	}
	c.checkReads(c.nodes, prior, size, all, 100)
}
