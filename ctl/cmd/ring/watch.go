package ring

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"ringkv/ctl/cli"
	"ringkv/ctl/follow"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// watcher follows a change over WatchChange, drawing its progress, until it leaves flight.
type watcher struct {
	Deps
	Interval  time.Duration
	Reconnect time.Duration
	// Plan fills in progress that comes without its plan (or the plan's request).
	Plan *kvpb.ChangePlan
}

func (w *watcher) fill(p *kvpb.ChangeProgress) {
	if w.Plan == nil || p == nil {
		return
	}
	if p.Plan == nil {
		p.Plan = w.Plan
	} else if p.Plan.Request == nil {
		p.Plan.Request = w.Plan.GetRequest()
	}
}

// follow watches change id (0 = whichever is in flight) until it is done, aborted or failed,
// and returns its last progress. A lost watch is re-opened for up to Reconnect. When ctx ends
// (Ctrl-C) it says how to watch again or abort, and returns errInterrupted.
func (w *watcher) follow(ctx context.Context, id, toEpoch uint64) (*kvpb.ChangeProgress, error) {
	c, err := w.Admin("")
	if err != nil {
		return nil, err
	}
	r := NewRenderer(w.IO)
	r.Every = max(w.Interval, time.Second)
	interval := follow.Interval(w.Interval, w.IO.ErrTTY)
	f := &follow.Watch[*kvpb.ChangeProgress]{
		ErrOut: w.IO.ErrOut, Addr: w.Addr(), Reconnect: w.Reconnect, Render: r,
		Open: func(ctx context.Context) (follow.Stream[*kvpb.ChangeProgress], error) {
			return c.WatchChange(ctx, &kvpb.ChangeStatusRequest{IntervalMs: uint32(interval / time.Millisecond)})
		},
		Next: func(p *kvpb.ChangeProgress) bool {
			w.fill(p)
			if id == 0 && inFlight(p) {
				id, toEpoch = p.GetId(), p.GetPlan().GetToEpoch()
			}
			return p.GetId() == id && !present.NoChange(p)
		},
		Finished: func(p *kvpb.ChangeProgress) bool { return p.GetState().Finished() },
		Resolve: func(ctx context.Context, last *kvpb.ChangeProgress) (*kvpb.ChangeProgress, error) {
			return w.resolve(ctx, c, id, toEpoch, last)
		},
		RPCError:    func(err error) error { return cli.RPCError(w.Addr(), err) },
		LostHint:    "the change goes on: kvctl ring status --addr ANY-NODE",
		Interrupted: func() error { return w.interrupted(id) },
	}
	return f.Run(ctx)
}

// resolve finds out how change id ended once it no longer shows as in flight: from
// ChangeStatus (the last change) or, failing that, from the ring's epoch.
func (w *watcher) resolve(ctx context.Context, c kvpb.AdminClient, id, toEpoch uint64, last *kvpb.ChangeProgress) (*kvpb.ChangeProgress, error) {
	cctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	p, err := c.ChangeStatus(cctx, &kvpb.ChangeStatusRequest{})
	if err == nil && p.GetId() == id && p.GetState().Finished() {
		w.fill(p)
		return p, nil
	}
	rr, err := c.Ring(cctx, &kvpb.RingRequest{})
	if err != nil {
		return last, cli.RPCError(w.Addr(), err)
	}
	out := &kvpb.ChangeProgress{Id: id}
	if last != nil {
		out = proto.Clone(last).(*kvpb.ChangeProgress)
	}
	w.fill(out)
	if rr.GetRing().GetEpoch() >= toEpoch && toEpoch > 0 {
		out.State = kvpb.ChangeState_CHANGE_STATE_DONE
	} else {
		out.State = kvpb.ChangeState_CHANGE_STATE_ABORTED
	}
	return out, nil
}

func (w *watcher) interrupted(id uint64) error {
	fmt.Fprintf(w.IO.ErrOut, "\nstopped watching; change %d goes on in the cluster.\n  watch again: kvctl ring status --addr %s\n  abort it:    kvctl ring abort --addr %s\n", id, w.Addr(), w.Addr())
	return fmt.Errorf("%w: change %d goes on", errInterrupted, id)
}
