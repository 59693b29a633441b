package repair

import (
	"context"
	"fmt"
	"time"

	"ringkv/ctl/follow"
	"ringkv/proto/kvpb"
)

// watcher follows a repair session over WatchRepair on its coordinator, drawing its
// progress, until it has finished.
type watcher struct {
	Deps
	Interval  time.Duration
	Reconnect time.Duration
	// Plan fills in progress that comes without its plan (or the plan's request).
	Plan *kvpb.RepairPlan
}

func (w *watcher) fill(p *kvpb.RepairProgress) {
	if w.Plan == nil || p == nil {
		return
	}
	if p.Plan == nil {
		p.Plan = w.Plan
	} else if p.Plan.Request == nil {
		p.Plan.Request = w.Plan.GetRequest()
	}
}

// follow watches session id on the coordinator c (at addr) until it has finished, and returns
// its last progress. A lost watch is re-opened for up to Reconnect. When ctx ends (Ctrl-C) it
// says how to watch again or abort, and returns errInterrupted.
func (w *watcher) follow(ctx context.Context, c kvpb.AdminClient, addr string, id uint64) (*kvpb.RepairProgress, error) {
	r := NewRenderer(w.IO)
	r.Every = max(w.Interval, time.Second)
	interval := follow.Interval(w.Interval, w.IO.ErrTTY)
	f := &follow.Watch[*kvpb.RepairProgress]{
		ErrOut: w.IO.ErrOut, Addr: addr, Reconnect: w.Reconnect, Render: r,
		Open: func(ctx context.Context) (follow.Stream[*kvpb.RepairProgress], error) {
			return c.WatchRepair(ctx, &kvpb.RepairStatusRequest{IntervalMs: uint32(interval / time.Millisecond)})
		},
		Next: func(p *kvpb.RepairProgress) bool {
			if p.GetId() != id {
				return false
			}
			w.fill(p)
			return true
		},
		Finished: func(p *kvpb.RepairProgress) bool { return p.GetState().Finished() },
		Resolve: func(ctx context.Context, _ *kvpb.RepairProgress) (*kvpb.RepairProgress, error) {
			return w.resolve(ctx, c, addr, id)
		},
		RPCError:    func(err error) error { return rpcError(addr, err) },
		LostHint:    "if it still runs, the repair goes on: kvctl repair status --watch --addr " + addr,
		Interrupted: func() error { return w.interrupted(addr, id) },
	}
	return f.Run(ctx)
}

// resolve finds out how session id ended once the watch no longer reports it.
func (w *watcher) resolve(ctx context.Context, c kvpb.AdminClient, addr string, id uint64) (*kvpb.RepairProgress, error) {
	cctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	p, err := c.RepairStatus(cctx, &kvpb.RepairStatusRequest{})
	if err != nil {
		return nil, rpcError(addr, err)
	}
	if p.GetId() == id && p.GetState().Finished() {
		w.fill(p)
		return p, nil
	}
	// Another session is the last one: this one ended too long ago to be reported, or the
	// node asked has lost its journal.
	return nil, fmt.Errorf("repair %d is no longer reported by %s: kvctl repair status shows the last session; ranges already repaired compare equal and stream nothing if you run it again", id, addr)
}

func (w *watcher) interrupted(addr string, id uint64) error {
	fmt.Fprintf(w.IO.ErrOut, "\nstopped watching; repair %d goes on, coordinated by %s.\n  watch again: kvctl repair status --watch --addr %s\n  abort it:    kvctl repair abort --addr %s\n", id, addr, addr, addr)
	return fmt.Errorf("%w: repair %d goes on", errInterrupted, id)
}
