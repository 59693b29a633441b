package repair

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"ringkv/node/cluster"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// A session survives its coordinator through the journal (cluster.RepairJournal, in raft):
// its plan at start, each range once done, its end. The node that restarts finds the
// sessions it coordinated still in flight and continues them from the ranges done; when a
// coordinator stays down for TakeoverAfter, the raft leader takes its session over. A
// coordinator cut off while its session was taken over learns so at its next journaled
// range (cluster.ErrNotCoordinator) and stops.

// errPaused cancels a range's work when repair is paused.
var errPaused = errors.New("repair paused")

// Pause pauses repair cluster-wide: the sessions in flight stop their tree walks and pulls
// within a second and wait. by names who asked. Errors: cluster.ErrNothingToPause (no
// session in flight, or paused already).
func (s *Service) Pause(ctx context.Context, by, reason string) (*kvpb.RepairProgress, error) {
	if err := s.cfg.Journal.PauseRepair(ctx, by, reason); err != nil {
		return nil, err
	}
	s.cfg.Logger.Info("repair paused", "by", by, "reason", reason)
	s.wake()
	return s.Progress(), nil
}

// Resume lifts the pause; the sessions go on from the ranges done. Errors:
// cluster.ErrNotPaused.
func (s *Service) Resume(ctx context.Context, by string) (*kvpb.RepairProgress, error) {
	if err := s.cfg.Journal.ResumeRepair(ctx); err != nil {
		return nil, err
	}
	s.cfg.Logger.Info("repair resumed", "by", by)
	s.wake()
	return s.Progress(), nil
}

func (s *Service) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changed()
}

func (s *Service) isPaused() bool { return s.cfg.Journal.Repairs().Paused != nil }

// watchJournal is closed at the next change of the journal (or in a second without Watch).
func (s *Service) watchJournal() <-chan struct{} {
	if s.cfg.Watch != nil {
		return s.cfg.Watch()
	}
	ch := make(chan struct{})
	time.AfterFunc(time.Second, func() { close(ch) })
	return ch
}

// waitUnpaused returns once repair is not paused, or ctx's error.
func (s *Service) waitUnpaused(ctx context.Context) error {
	for {
		w := s.watchJournal()
		if !s.isPaused() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w:
		case <-time.After(time.Second):
		}
	}
}

// cancelOnPause cancels ctx with errPaused when repair is paused; stop ends the watch.
func (s *Service) cancelOnPause(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			w := s.watchJournal()
			if s.isPaused() {
				cancel(errPaused)
				return
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-w:
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// follow keeps this node's part of the journal until ctx ends: it wakes watchers when the
// pause changes, continues the sessions this node coordinates that run nowhere, journals an
// end that could not be journaled, and, on the raft leader, takes over the sessions whose
// coordinator stays down.
func (s *Service) follow(ctx context.Context) {
	down := map[uint64]time.Time{}
	probed := map[uint64]time.Time{}
	for {
		w := s.watchJournal()
		j := s.cfg.Journal.Repairs()
		s.notePause(j.Paused)
		if id, _ := s.cfg.Journal.Leader(); id != "" {
			s.keep(ctx, j, down, probed)
		}
		select {
		case <-ctx.Done():
			return
		case <-w:
		case <-time.After(time.Second):
		}
	}
}

// notePause wakes watchers when the journal's pause changed.
func (s *Service) notePause(p *cluster.Paused) {
	k := ""
	if p != nil {
		k = fmt.Sprintf("%s/%d/%s", p.By, p.SinceUnix, p.Reason)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k != s.paused {
		s.paused = k
		s.changed()
	}
}

func (s *Service) keep(ctx context.Context, j *cluster.RepairJournal, down, probed map[uint64]time.Time) {
	s.mu.Lock()
	cur := s.cur
	running := (cur != nil && cur.state == kvpb.RepairState_REPAIR_STATE_RUNNING) || s.starting > 0
	endPending := cur != nil && !running && !cur.journaledEnd
	s.mu.Unlock()
	for _, js := range j.Sessions {
		if !js.InFlight() {
			delete(down, js.ID)
			continue
		}
		switch {
		case cur != nil && js.ID == cur.id:
			if endPending && s.base.Err() == nil {
				s.mu.Lock()
				state, errText := cur.state, cur.err
				s.mu.Unlock()
				if s.journalEnd(cur.id, state, errText) {
					s.mu.Lock()
					cur.journaledEnd = true
					s.mu.Unlock()
				}
			}
		case js.Coordinator == s.cfg.Self:
			if !running {
				s.continueSession(ctx, js)
				return
			}
		case !running && s.cfg.Journal.IsLeader():
			if time.Since(probed[js.ID]) < time.Second {
				continue
			}
			probed[js.ID] = time.Now()
			if s.alive(ctx, js.Coordinator) {
				delete(down, js.ID)
				continue
			}
			since, ok := down[js.ID]
			if !ok {
				down[js.ID] = time.Now()
				continue
			}
			if time.Since(since) < s.cfg.TakeoverAfter {
				continue
			}
			if err := s.cfg.Journal.TakeOverRepair(ctx, js.ID, js.Coordinator, s.cfg.Self); err != nil {
				s.cfg.Logger.Warn("take over repair", "id", js.ID, "from", js.Coordinator, "err", err)
				continue
			}
			s.cfg.Logger.Warn("repair taken over", "id", js.ID, "from", js.Coordinator, "down_for", time.Since(since).Round(time.Second))
			return // continued at the next turn, once applied here
		}
	}
}

// alive reports whether coordinator id answers NodeInfo (a member of the ring only).
func (s *Service) alive(ctx context.Context, id string) bool {
	v := s.cfg.View()
	if v == nil || v.Current == nil {
		return true
	}
	m, ok := v.Current.Member(id)
	if !ok {
		return false
	}
	c, err := s.cfg.Dial.Admin(m.Addr)
	if err != nil {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = c.NodeInfo(cctx, &kvpb.NodeInfoRequest{})
	return err == nil || ctx.Err() != nil
}

// continueSession runs a journaled session on this node from the ranges done. A session
// whose ring is no longer the ring ends ABORTED.
func (s *Service) continueSession(ctx context.Context, js *cluster.RepairSession) {
	plan := &kvpb.RepairPlan{}
	if err := proto.Unmarshal(js.Plan, plan); err != nil {
		s.endJournaled(ctx, js, kvpb.RepairState_REPAIR_STATE_FAILED, "journaled plan does not decode: "+err.Error())
		return
	}
	plan.Id = js.ID
	members, why := s.replicasOf(plan)
	if why != "" {
		s.endJournaled(ctx, js, kvpb.RepairState_REPAIR_STATE_ABORTED, why)
		return
	}
	ss := newSession(plan, members, js.Background, time.Unix(js.StartedUnix, 0))
	ss.previous = js.Previous
	for i, b := range js.Done {
		if i < 0 || i >= len(ss.ranges) {
			continue
		}
		r := &kvpb.RangeRepair{}
		if proto.Unmarshal(b, r) != nil {
			continue
		}
		r.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE
		ss.ranges[i] = r
		ss.continued++
		for _, pr := range r.Pairs {
			ss.keysStreamed += pr.KeysToA + pr.KeysToB
			ss.bytesStreamed += pr.BytesStreamed
		}
	}
	if err := s.launch(ss); err != nil {
		s.cfg.Logger.Warn("continue repair", "id", js.ID, "err", err)
		return
	}
	from := "its journal"
	if js.Previous != "" {
		from = js.Previous
	}
	s.cfg.Logger.Info("repair continued", "id", js.ID, "from", from, "ranges_done", ss.continued, "ranges", len(ss.ranges))
}

// replicasOf finds the plan's replicas in the current ring; why says why it cannot.
func (s *Service) replicasOf(plan *kvpb.RepairPlan) ([]planned, string) {
	v := s.cfg.View()
	if v == nil || v.Current == nil || v.Changing() || v.Current.Epoch() != plan.Epoch {
		return nil, ErrRingChanged.Error()
	}
	out := make([]planned, len(plan.Ranges))
	for i, rr := range plan.Ranges {
		out[i].keys = rr.TreeKeys
		for _, id := range rr.Replicas {
			m, ok := v.Current.Member(id)
			if !ok {
				return nil, fmt.Sprintf("replica %s left the ring", id)
			}
			out[i].members = append(out[i].members, ring.Member{ID: m.ID, Addr: m.Addr})
		}
	}
	return out, ""
}

func (s *Service) endJournaled(ctx context.Context, js *cluster.RepairSession, state kvpb.RepairState, why string) {
	if err := s.cfg.Journal.EndRepair(ctx, js.ID, s.cfg.Self, state.String(), why); err != nil {
		s.cfg.Logger.Warn("journal repair end", "id", js.ID, "err", err)
		return
	}
	s.cfg.Logger.Info("journaled repair ended", "id", js.ID, "state", state.String(), "why", why)
}

func stateWord(st kvpb.RepairState) string {
	switch st {
	case kvpb.RepairState_REPAIR_STATE_DONE:
		return "done"
	case kvpb.RepairState_REPAIR_STATE_FAILED:
		return "failed"
	case kvpb.RepairState_REPAIR_STATE_ABORTED:
		return "aborted"
	}
	return "running"
}

// journaledInFlight is the first session in flight in the journal, nil when none.
func (s *Service) journaledInFlight() *cluster.RepairSession {
	j := s.cfg.Journal.Repairs()
	ids := make([]uint64, 0, len(j.Sessions))
	for _, js := range j.Sessions {
		if js.InFlight() {
			ids = append(ids, js.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	return j.Session(ids[0])
}

// journaledProgress is session id as the journal has it: plan, ranges done, coordinator,
// pause.
func (s *Service) journaledProgress(j *cluster.RepairJournal, id uint64) *kvpb.RepairProgress {
	js := j.Session(id)
	if js == nil {
		return &kvpb.RepairProgress{Coordinator: s.cfg.Self, Paused: j.Paused.Proto()}
	}
	plan := &kvpb.RepairPlan{}
	_ = proto.Unmarshal(js.Plan, plan)
	plan.Id = js.ID
	p := &kvpb.RepairProgress{
		Id: js.ID, Plan: plan, Coordinator: js.Coordinator, PreviousCoordinator: js.Previous,
		RangesTotal: uint32(len(plan.Ranges)), StartedUnix: js.StartedUnix, FinishedUnix: js.FinishedUnix,
		Error: js.Error, Journaled: true, RateLimitBytes: plan.GetRequest().GetRateBytes(),
	}
	p.State = kvpb.RepairState_REPAIR_STATE_RUNNING
	if !js.InFlight() {
		p.State = kvpb.RepairState(kvpb.RepairState_value[js.State])
	}
	for i, rr := range plan.Ranges {
		r := &kvpb.RangeRepair{Range: rr}
		if b, ok := js.Done[i]; ok && proto.Unmarshal(b, r) == nil {
			r.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE
			p.RangesDone++
			for _, pr := range r.Pairs {
				p.KeysStreamed += pr.KeysToA + pr.KeysToB
				p.BytesStreamed += pr.BytesStreamed
			}
		}
		p.Ranges = append(p.Ranges, r)
	}
	now := s.cfg.Now()
	p.PausedSeconds = uint64(pausedFor(j, js.ID, time.Unix(js.StartedUnix, 0), now) / time.Second)
	if js.InFlight() {
		p.Paused = j.Paused.Proto()
	}
	return p
}
