package repair

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"ringkv/proto/kvpb"
)

// session is one repair. Its fields below plan are guarded by Service.mu.
type session struct {
	id         uint64
	plan       *kvpb.RepairPlan
	work       []planned // per plan range
	cancel     context.CancelCauseFunc
	done       chan struct{}
	background bool

	state                                     kvpb.RepairState
	ranges                                    []*kvpb.RangeRepair
	started, finished                         time.Time
	keysStreamed, bytesStreamed, keysCompared uint64
	treeBytes                                 uint64
	err                                       string
}

// Start plans a repair and starts it unless refused (ErrRefused, with the plan) or a
// session runs on this node already (ErrRunning). It returns once the session runs.
func (s *Service) Start(ctx context.Context, req *kvpb.RepairRequest) (*kvpb.RepairPlan, error) {
	return s.start(ctx, req, false)
}

func (s *Service) start(ctx context.Context, req *kvpb.RepairRequest, background bool) (*kvpb.RepairPlan, error) {
	if s.Running() {
		return nil, ErrRunning
	}
	plan, members, err := s.plan(ctx, req, background)
	if err != nil {
		return nil, err
	}
	if len(plan.Refusals) > 0 {
		return plan, fmt.Errorf("%w: %s", ErrRefused, strings.Join(plan.Refusals, "; "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.state == kvpb.RepairState_REPAIR_STATE_RUNNING {
		return nil, ErrRunning
	}
	if s.base.Err() != nil {
		return nil, fmt.Errorf("%w: node stopping", ErrRefused)
	}
	s.nextID++
	plan.Id = s.nextID
	ss := &session{
		id: plan.Id, plan: plan, work: members, done: make(chan struct{}), background: background,
		state: kvpb.RepairState_REPAIR_STATE_RUNNING, started: s.cfg.Now(),
	}
	for _, r := range plan.Ranges {
		ss.ranges = append(ss.ranges, &kvpb.RangeRepair{Range: r})
	}
	sctx, cancel := context.WithCancelCause(s.base)
	ss.cancel = cancel
	s.cur = ss
	s.changed()
	s.wg.Go(func() { s.run(sctx, ss) })
	s.cfg.Logger.Info("repair started", "id", ss.id, "ranges", len(plan.Ranges), "background", background,
		"est_keys", plan.EstKeys, "dry_run", plan.Request.GetDryRun())
	return proto.Clone(plan).(*kvpb.RepairPlan), nil
}

// changed wakes the watchers; the caller holds mu.
func (s *Service) changed() {
	close(s.notify)
	s.notify = make(chan struct{})
}

// Watch is closed at the next change of the progress (take it before reading Progress).
func (s *Service) Watch() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notify
}

// Running reports whether a session runs.
func (s *Service) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil && s.cur.state == kvpb.RepairState_REPAIR_STATE_RUNNING
}

// Abort stops the running session and returns its final progress (ErrNoRepair: none).
func (s *Service) Abort(ctx context.Context) (*kvpb.RepairProgress, error) {
	s.mu.Lock()
	ss := s.cur
	s.mu.Unlock()
	if ss == nil || !s.Running() {
		return nil, ErrNoRepair
	}
	ss.cancel(errors.New("aborted"))
	select {
	case <-ss.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Progress(), nil
}

// run repairs the session's ranges, Parallel at a time, and settles its state.
func (s *Service) run(ctx context.Context, ss *session) {
	defer close(ss.done)
	var watcher sync.WaitGroup
	defer watcher.Wait()
	defer ss.cancel(nil)
	watcher.Go(func() { s.stopOnRingChange(ctx, ss) })
	sem := make(chan struct{}, s.cfg.Parallel)
	var wg sync.WaitGroup
	for i := range ss.plan.Ranges {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			s.repairRange(ctx, ss, i)
		})
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.finished = s.cfg.Now()
	failed := 0
	for _, r := range ss.ranges {
		if r.State == kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED {
			failed++
		}
	}
	switch {
	case ctx.Err() != nil:
		ss.state = kvpb.RepairState_REPAIR_STATE_ABORTED
		ss.err = context.Cause(ctx).Error()
	case failed > 0:
		ss.state = kvpb.RepairState_REPAIR_STATE_FAILED
		ss.err = fmt.Sprintf("%d of %d ranges could not be repaired", failed, len(ss.ranges))
	default:
		ss.state = kvpb.RepairState_REPAIR_STATE_DONE
	}
	s.changed()
	s.cfg.Logger.Info("repair finished", "id", ss.id, "state", ss.state.String(), "keys_streamed", ss.keysStreamed,
		"bytes_streamed", ss.bytesStreamed, "keys_compared", ss.keysCompared, "tree_bytes", ss.treeBytes, "err", ss.err)
}

// stopOnRingChange cancels the session when a ring change begins or the epoch moves: the
// ranges and replicas it compares are no longer those of the ring.
func (s *Service) stopOnRingChange(ctx context.Context, ss *session) {
	for {
		var w <-chan struct{}
		if s.cfg.Watch != nil {
			w = s.cfg.Watch()
		}
		v := s.cfg.View()
		if v == nil || v.Current == nil || v.Changing() || v.Current.Epoch() != ss.plan.Epoch {
			ss.cancel(ErrRingChanged)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-w:
		case <-time.After(time.Second):
		}
	}
}

// setRange updates range i under mu and wakes the watchers.
func (s *Service) setRange(ss *session, i int, fn func(r *kvpb.RangeRepair)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(ss.ranges[i])
	s.changed()
}

// repairRange compares one range's replicas and has them pull what differs from each other.
func (s *Service) repairRange(ctx context.Context, ss *session, i int) {
	err := s.compareAndStream(ctx, ss, i)
	s.setRange(ss, i, func(r *kvpb.RangeRepair) {
		if err != nil {
			r.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED
			r.Error = err.Error()
			return
		}
		r.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE
	})
	if err != nil && ctx.Err() == nil {
		rr := ss.plan.Ranges[i]
		s.cfg.Logger.Warn("repair range", "id", ss.id, "range", fmtRange(rr.Start, rr.End), "err", err)
	}
}

// Progress is the running session's progress, else the last one's; state NONE before the
// first.
func (s *Service) Progress() *kvpb.RepairProgress {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.cur
	if ss == nil {
		return &kvpb.RepairProgress{Coordinator: s.cfg.Self}
	}
	p := &kvpb.RepairProgress{
		Id: ss.id, State: ss.state, Plan: proto.Clone(ss.plan).(*kvpb.RepairPlan), Coordinator: s.cfg.Self,
		RangesTotal: uint32(len(ss.ranges)), KeysStreamed: ss.keysStreamed, BytesStreamed: ss.bytesStreamed,
		KeysCompared: ss.keysCompared, TreeBytes: ss.treeBytes, RateLimitBytes: ss.plan.Request.GetRateBytes(), Error: ss.err,
		StartedUnix: ss.started.Unix(),
	}
	if !ss.finished.IsZero() {
		p.FinishedUnix = ss.finished.Unix()
	}
	sum := map[string]*kvpb.PairRepair{}
	var doneBytes, totalBytes uint64
	for _, r := range ss.ranges {
		p.Ranges = append(p.Ranges, proto.Clone(r).(*kvpb.RangeRepair))
		est := r.GetRange().GetEstBytes() + 1
		totalBytes += est
		if r.State == kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE || r.State == kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED {
			p.RangesDone++
			doneBytes += est
		}
		for _, pr := range r.Pairs {
			t := sum[pairName(pr.A, pr.B)]
			if t == nil {
				t = &kvpb.PairRepair{A: pr.A, B: pr.B}
				sum[pairName(pr.A, pr.B)] = t
			}
			t.LeavesCompared += pr.LeavesCompared
			t.LeavesMismatched += pr.LeavesMismatched
			t.KeysToA += pr.KeysToA
			t.KeysToB += pr.KeysToB
			t.BytesStreamed += pr.BytesStreamed
		}
	}
	for _, name := range ss.plan.Pairs {
		if t := sum[name]; t != nil {
			p.Pairs = append(p.Pairs, t)
		}
	}
	end := ss.finished
	if end.IsZero() {
		end = s.cfg.Now()
	}
	if el := end.Sub(ss.started).Seconds(); el > 0 {
		p.RateBytesPerSec = float64(ss.bytesStreamed) / el
		if ss.state == kvpb.RepairState_REPAIR_STATE_RUNNING && doneBytes > 0 {
			frac := float64(doneBytes) / float64(totalBytes)
			p.EtaSeconds = el * (1 - frac) / frac
		}
	}
	return p
}

// Has reports whether this node has coordinated a session since it started.
func (s *Service) Has() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil
}
