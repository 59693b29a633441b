package repair

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"ringkv/node/cluster"
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
	// continued: ranges found done in the journal when this node continued the session,
	// from previous (its coordinator before a takeover; "" after a restart).
	continued int
	previous  string
	// journaledEnd is set once the session's end is in the journal.
	journaledEnd bool
}

// Start plans a repair and starts it unless refused (ErrRefused, with the plan) or a
// session runs on this node already (ErrRunning). It returns once the session is journaled
// and runs.
func (s *Service) Start(ctx context.Context, req *kvpb.RepairRequest) (*kvpb.RepairPlan, error) {
	return s.start(ctx, req, false)
}

func (s *Service) start(ctx context.Context, req *kvpb.RepairRequest, background bool) (*kvpb.RepairPlan, error) {
	if s.Running() {
		return nil, ErrRunning
	}
	if p := s.cfg.Journal.Repairs().Paused; p != nil {
		return nil, fmt.Errorf("%w: repair is paused by %s: kvctl repair resume first", ErrRefused, p.By)
	}
	plan, members, err := s.plan(ctx, req, background)
	if err != nil {
		return nil, err
	}
	if len(plan.Refusals) > 0 {
		return plan, fmt.Errorf("%w: %s", ErrRefused, strings.Join(plan.Refusals, "; "))
	}
	if s.base.Err() != nil {
		return nil, fmt.Errorf("%w: node stopping", ErrRefused)
	}
	for i, rr := range plan.Ranges {
		rr.TreeKeys = members[i].keys
	}
	b, err := proto.Marshal(plan)
	if err != nil {
		return nil, fmt.Errorf("encode repair plan: %w", err)
	}
	// The journal is the arbiter of one session per coordinator: a concurrent Start loses
	// there with ErrRunning's reason. Meanwhile the journal loop leaves this node's new
	// session to this call.
	s.mu.Lock()
	s.starting++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.starting--
		s.mu.Unlock()
	}()
	id, err := s.cfg.Journal.BeginRepair(ctx, &cluster.RepairSession{Coordinator: s.cfg.Self, Background: background, Plan: b})
	if err != nil {
		if errors.Is(err, cluster.ErrRepairPaused) {
			return nil, fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return nil, fmt.Errorf("journal repair: %w", err)
	}
	plan.Id = id
	ss := newSession(plan, members, background, s.cfg.Now())
	if err := s.launch(ss); err != nil {
		return nil, err
	}
	s.cfg.Logger.Info("repair started", "id", ss.id, "ranges", len(plan.Ranges), "background", background,
		"est_keys", plan.EstKeys, "dry_run", plan.Request.GetDryRun())
	return proto.Clone(plan).(*kvpb.RepairPlan), nil
}

func newSession(plan *kvpb.RepairPlan, members []planned, background bool, now time.Time) *session {
	ss := &session{
		id: plan.Id, plan: plan, work: members, done: make(chan struct{}), background: background,
		state: kvpb.RepairState_REPAIR_STATE_RUNNING, started: now,
	}
	for _, r := range plan.Ranges {
		ss.ranges = append(ss.ranges, &kvpb.RangeRepair{Range: r})
	}
	return ss
}

// launch makes ss this node's session and runs it.
func (s *Service) launch(ss *session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.state == kvpb.RepairState_REPAIR_STATE_RUNNING {
		if s.cur.id == ss.id {
			return nil // launched already
		}
		return ErrRunning
	}
	if s.base.Err() != nil {
		return fmt.Errorf("%w: node stopping", ErrRefused)
	}
	sctx, cancel := context.WithCancelCause(s.base)
	ss.cancel = cancel
	s.cur = ss
	s.changed()
	s.wg.Go(func() { s.run(sctx, ss) })
	return nil
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

// Abort stops the running session and returns its final progress. With none running here, it
// ends a session in flight in the journal whose coordinator is gone (ErrNoRepair: none).
func (s *Service) Abort(ctx context.Context) (*kvpb.RepairProgress, error) {
	s.mu.Lock()
	ss := s.cur
	s.mu.Unlock()
	if ss == nil || !s.Running() {
		js := s.journaledInFlight()
		if js == nil {
			return nil, ErrNoRepair
		}
		if err := s.cfg.Journal.EndRepair(ctx, js.ID, "", kvpb.RepairState_REPAIR_STATE_ABORTED.String(), "aborted"); err != nil {
			if errors.Is(err, cluster.ErrNotCoordinator) {
				return nil, ErrNoRepair // it ended meanwhile
			}
			return nil, fmt.Errorf("abort repair %d: %w", js.ID, err)
		}
		return s.journaledProgress(s.cfg.Journal.Repairs(), js.ID), nil
	}
	ss.cancel(errors.New("aborted"))
	select {
	case <-ss.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Progress(), nil
}

// run repairs the session's ranges not yet done, Parallel at a time, settles its state and
// journals its end (not when the node stops: the restarted node continues it).
func (s *Service) run(ctx context.Context, ss *session) {
	defer close(ss.done)
	var watcher sync.WaitGroup
	defer watcher.Wait()
	defer ss.cancel(nil)
	watcher.Go(func() { s.stopOnRingChange(ctx, ss) })
	sem := make(chan struct{}, s.cfg.Parallel)
	var wg sync.WaitGroup
	for i := range ss.plan.Ranges {
		s.mu.Lock()
		done := ss.ranges[i].State == kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE
		s.mu.Unlock()
		if done {
			continue // done before a restart or a takeover: not compared again
		}
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
	finished := s.cfg.Now()
	failed := 0
	for _, r := range ss.ranges {
		if r.State == kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED {
			failed++
		}
	}
	s.mu.Unlock()
	stopping := s.base.Err() != nil
	var state kvpb.RepairState
	var errText string
	switch {
	case ctx.Err() != nil:
		state, errText = kvpb.RepairState_REPAIR_STATE_ABORTED, context.Cause(ctx).Error()
		if stopping {
			errText = "node stopping: continued when it restarts"
		}
	case failed > 0:
		state, errText = kvpb.RepairState_REPAIR_STATE_FAILED, fmt.Sprintf("%d of %d ranges could not be repaired", failed, len(ss.ranges))
	default:
		state = kvpb.RepairState_REPAIR_STATE_DONE
	}
	// The end is journaled before it shows here, so that a session seen over here is over
	// in the journal too (a next Start is not refused for it). Not when the node stops: the
	// restarted node continues it; nor when another node took it over.
	journaled := stopping || errors.Is(context.Cause(ctx), cluster.ErrNotCoordinator) || s.journalEnd(ss.id, state, errText)
	s.mu.Lock()
	ss.finished, ss.state, ss.err, ss.journaledEnd = finished, state, errText, journaled
	s.changed()
	s.mu.Unlock()
	s.cfg.Logger.Info("repair finished", "id", ss.id, "state", state.String(), "keys_streamed", ss.keysStreamed,
		"bytes_streamed", ss.bytesStreamed, "keys_compared", ss.keysCompared, "tree_bytes", ss.treeBytes, "err", errText)
}

// journalEnd journals the end of session id; false when it could not (the journal loop
// retries while no leader answers).
func (s *Service) journalEnd(id uint64, state kvpb.RepairState, errText string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.cfg.Journal.EndRepair(ctx, id, s.cfg.Self, state.String(), errText)
	if err != nil && !errors.Is(err, cluster.ErrNotCoordinator) {
		s.cfg.Logger.Warn("journal repair end", "id", id, "err", err)
		return false
	}
	return true
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

// repairRange compares one range's replicas and has them pull what differs from each other,
// and journals the range once done. While repair is paused it waits; a pause that comes
// while it works stops its tree walks and pulls, and the range starts over on resume.
func (s *Service) repairRange(ctx context.Context, ss *session, i int) {
	var err error
	for {
		if err = s.waitUnpaused(ctx); err != nil {
			break
		}
		rctx, cancel := context.WithCancelCause(ctx)
		stop := s.cancelOnPause(rctx, cancel)
		err = s.compareAndStream(rctx, ss, i)
		stop()
		cancel(nil)
		if err == nil || ctx.Err() != nil || !errors.Is(context.Cause(rctx), errPaused) {
			break
		}
		s.setRange(ss, i, func(r *kvpb.RangeRepair) {
			r.State, r.Pairs = kvpb.RangeRepairState_RANGE_REPAIR_STATE_PENDING, nil
		})
	}
	var result []byte
	s.setRange(ss, i, func(r *kvpb.RangeRepair) {
		if err != nil {
			r.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED
			r.Error = err.Error()
			return
		}
		r.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE
		result, _ = proto.Marshal(r)
	})
	if err != nil {
		if ctx.Err() == nil {
			rr := ss.plan.Ranges[i]
			s.cfg.Logger.Warn("repair range", "id", ss.id, "range", fmtRange(rr.Start, rr.End), "err", err)
		}
		return
	}
	if jerr := s.cfg.Journal.RepairRangeDone(ctx, ss.id, s.cfg.Self, i, result); jerr != nil {
		if errors.Is(jerr, cluster.ErrNotCoordinator) {
			// Taken over (or ended) while this node was cut off: the journal's coordinator
			// goes on; this one stops.
			ss.cancel(fmt.Errorf("%w: %w", cluster.ErrNotCoordinator, jerr))
			return
		}
		// The range is repaired; unjournaled, a continuation would only compare it again.
		s.cfg.Logger.Warn("journal repair range", "id", ss.id, "range", i, "err", jerr)
	}
}

// Progress is this node's running session's progress; else that of a session in flight in
// the journal (coordinated by another node, or by this one before it restarted: Journaled);
// else the last session of the cluster (this node's own, or as journaled); state NONE
// before the first. Paused is set while repair is.
func (s *Service) Progress() *kvpb.RepairProgress {
	j := s.cfg.Journal.Repairs()
	s.mu.Lock()
	ss := s.cur
	if ss == nil || ss.state != kvpb.RepairState_REPAIR_STATE_RUNNING {
		for _, js := range j.Sessions {
			if js.InFlight() && (ss == nil || js.ID != ss.id) {
				s.mu.Unlock()
				return s.journaledProgress(j, js.ID)
			}
		}
	}
	// None in flight: the last session journaled, unless this node's own is as recent (its
	// progress has more than the journal keeps).
	var last *cluster.RepairSession
	for _, js := range j.Sessions {
		if last == nil || js.ID > last.ID {
			last = js
		}
	}
	if last != nil && (ss == nil || last.ID > ss.id) {
		s.mu.Unlock()
		return s.journaledProgress(j, last.ID)
	}
	defer s.mu.Unlock()
	if ss == nil {
		return &kvpb.RepairProgress{Coordinator: s.cfg.Self, Paused: j.Paused.Proto()}
	}
	return s.progressLocked(ss, j)
}

// LocalProgress is the progress of this node's session (running, else its last one), nil
// before the first: what NodeInfo carries.
func (s *Service) LocalProgress() *kvpb.RepairProgress {
	j := s.cfg.Journal.Repairs()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil
	}
	return s.progressLocked(s.cur, j)
}

// pausedFor is how long session id has been paused: the journaled time up to the last resume,
// and the pause in force.
func pausedFor(j *cluster.RepairJournal, id uint64, started, now time.Time) time.Duration {
	var d time.Duration
	js := j.Session(id)
	if js != nil {
		d = time.Duration(js.PausedSeconds) * time.Second
	}
	if p := j.Paused; p != nil && (js == nil || js.InFlight()) {
		d += now.Sub(time.Unix(max(p.SinceUnix, started.Unix()), 0))
	}
	return max(d, 0)
}

func (s *Service) progressLocked(ss *session, j *cluster.RepairJournal) *kvpb.RepairProgress {
	p := &kvpb.RepairProgress{
		Id: ss.id, State: ss.state, Plan: proto.Clone(ss.plan).(*kvpb.RepairPlan), Coordinator: s.cfg.Self,
		RangesTotal: uint32(len(ss.ranges)), KeysStreamed: ss.keysStreamed, BytesStreamed: ss.bytesStreamed,
		KeysCompared: ss.keysCompared, TreeBytes: ss.treeBytes, RateLimitBytes: ss.plan.Request.GetRateBytes(), Error: ss.err,
		StartedUnix: ss.started.Unix(), RangesContinued: uint32(ss.continued), PreviousCoordinator: ss.previous,
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
	paused := pausedFor(j, ss.id, ss.started, end)
	p.PausedSeconds = uint64(paused / time.Second)
	if ss.state == kvpb.RepairState_REPAIR_STATE_RUNNING {
		p.Paused = j.Paused.Proto()
	}
	if el := (end.Sub(ss.started) - paused).Seconds(); el > 0 {
		p.RateBytesPerSec = float64(ss.bytesStreamed) / el
		if ss.state == kvpb.RepairState_REPAIR_STATE_RUNNING && doneBytes > 0 {
			frac := float64(doneBytes) / float64(totalBytes)
			p.EtaSeconds = el * (1 - frac) / frac
		}
	}
	return p
}
