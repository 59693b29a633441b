// Read reconciliation: after a read, the newest version is written to the replicas that answered
// with an older one or none, by a pool of workers.

package replica

import (
	"context"
	"time"

	"ringkv/node/ring"
	"ringkv/node/store"
)

type reconcileJob struct {
	t   target
	key []byte
	rec store.Record
	vid ring.ViewID // the view the read was routed by
}

// reconcile queues a write of the newest version to every stale replica of op.
func (c *Coordinator) reconcile(op *readOp) {
	if !op.any {
		return
	}
	for i, r := range op.got {
		if r == nil || (r.found && !op.newest.Newer(r.rec)) {
			continue
		}
		select {
		case c.reconciles <- reconcileJob{t: op.ts[i], key: op.key, rec: op.newest, vid: op.vid}:
		default: // queue full: a later read reconciliations it
		}
	}
}

func (c *Coordinator) reconcileWorker() {
	defer c.wg.Done()
	for {
		select {
		case job := <-c.reconciles:
			c.reconcileOne(job)
		case <-c.base.Done():
			return
		}
	}
}

func (c *Coordinator) reconcileOne(job reconcileJob) {
	if c.admit(job.t) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.base, c.cfg.ReplicaTimeout)
	start := time.Now()
	_, err := job.t.r.Write(ctx, job.key, job.rec, job.vid)
	cancel()
	c.account(job.t, ring.Token(job.key), time.Since(start), err, false)
	if err == nil && c.obs != nil {
		c.obs.Reconciled()
	}
}
