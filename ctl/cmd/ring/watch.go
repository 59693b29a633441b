package ring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"ringkv/ctl/cli"
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
	interval := w.Interval
	if !w.IO.ErrTTY {
		interval = max(interval, time.Second)
	}
	var last *kvpb.ChangeProgress
	var lostAt time.Time
	for {
		err := func() error {
			stream, err := c.WatchChange(ctx, &kvpb.ChangeStatusRequest{IntervalMs: uint32(interval / time.Millisecond)})
			if err != nil {
				return err
			}
			for {
				p, err := stream.Recv()
				if err != nil {
					return err
				}
				lostAt = time.Time{}
				w.fill(p)
				if id == 0 && inFlight(p) {
					id, toEpoch = p.GetId(), p.GetPlan().GetToEpoch()
				}
				if p.GetId() != id || present.NoChange(p) {
					return errGone
				}
				last = p
				if p.GetState().Finished() {
					r.Update(p, true)
					return nil
				}
				r.Update(p, false)
			}
		}()
		switch {
		case err == nil:
			return last, nil
		case ctx.Err() != nil:
			return last, w.interrupted(id)
		case errors.Is(err, errGone) || errors.Is(err, io.EOF):
			return w.resolve(ctx, c, id, toEpoch, last)
		}
		if s, ok := status.FromError(err); ok && (s.Code() == codes.Unimplemented || s.Code() == codes.PermissionDenied || s.Code() == codes.Unauthenticated) {
			return last, cli.RPCError(w.Addr(), err)
		}
		if lostAt.IsZero() {
			lostAt = time.Now()
			fmt.Fprintf(w.IO.ErrOut, "lost the watch on %s (%s); retrying for %s\n", w.Addr(), present.RPC(err), w.Reconnect)
			r.Forget()
		}
		if time.Since(lostAt) > w.Reconnect {
			return last, fmt.Errorf("lost contact with %s: %s; the change goes on: kvctl ring status --addr ANY-NODE", w.Addr(), present.RPC(err))
		}
		select {
		case <-ctx.Done():
			return last, w.interrupted(id)
		case <-time.After(500 * time.Millisecond):
		}
	}
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
