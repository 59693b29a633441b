package repair

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/ctl/present"
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
	interval := w.Interval
	if !w.IO.ErrTTY {
		interval = max(interval, time.Second)
	}
	var last *kvpb.RepairProgress
	var lostAt time.Time
	for {
		err := func() error {
			stream, err := c.WatchRepair(ctx, &kvpb.RepairStatusRequest{IntervalMs: uint32(interval / time.Millisecond)})
			if err != nil {
				return err
			}
			for {
				p, err := stream.Recv()
				if err != nil {
					return err
				}
				lostAt = time.Time{}
				if p.GetId() != id {
					return errGone
				}
				w.fill(p)
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
			return last, w.interrupted(addr, id)
		case errors.Is(err, errGone) || errors.Is(err, io.EOF):
			return w.resolve(ctx, c, addr, id)
		}
		if s, ok := status.FromError(err); ok && (s.Code() == codes.Unimplemented || s.Code() == codes.PermissionDenied || s.Code() == codes.Unauthenticated) {
			return last, rpcError(addr, err)
		}
		if lostAt.IsZero() {
			lostAt = time.Now()
			fmt.Fprintf(w.IO.ErrOut, "lost the watch on %s (%s); retrying for %s\n", addr, present.RPC(err), w.Reconnect)
			r.Forget()
		}
		if time.Since(lostAt) > w.Reconnect {
			return last, fmt.Errorf("lost contact with %s: %s; if it still runs, the repair goes on: kvctl repair status --watch --addr %s", addr, present.RPC(err), addr)
		}
		select {
		case <-ctx.Done():
			return last, w.interrupted(addr, id)
		case <-time.After(500 * time.Millisecond):
		}
	}
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
	// A session lives in its coordinator's memory: a coordinator that restarted forgot it.
	return nil, fmt.Errorf("repair %d is no longer known to its coordinator %s (restarted?): run kvctl repair again; ranges already repaired compare equal and stream nothing", id, addr)
}

func (w *watcher) interrupted(addr string, id uint64) error {
	fmt.Fprintf(w.IO.ErrOut, "\nstopped watching; repair %d goes on, coordinated by %s.\n  watch again: kvctl repair status --watch --addr %s\n  abort it:    kvctl repair abort --addr %s\n", id, addr, addr, addr)
	return fmt.Errorf("%w: repair %d goes on", errInterrupted, id)
}
