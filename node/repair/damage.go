package repair

import (
	"context"
	"errors"
	"slices"
	"time"

	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// Damaged is a store's record of the token ranges it may miss records in (store.Store: a
// node started with --recover on damaged data). Safe for concurrent use.
type Damaged interface {
	// DamagedIn reports whether any token of the ring range (start, end] is marked.
	DamagedIn(start, end uint64) bool
	// ClearDamaged removes the mark of (start, end] durably: repaired, from every other
	// replica; not repaired, because no other replica holds it.
	ClearDamaged(start, end uint64, repaired bool) error
}

// DamagedRanges counts the ranges of the current ring this node replicates that d marks
// damaged (0 while the node is not in a ring).
func (s *Service) DamagedRanges(d Damaged) int {
	v := s.cfg.View()
	if v == nil || v.Current == nil {
		return 0
	}
	cur := v.Current
	n := 0
	for _, r := range cur.Ranges() {
		if d.DamagedIn(r.Start, r.End) && slices.ContainsFunc(cur.Lookup(r.End, cur.Replicas()), func(m ring.Member) bool { return m.ID == s.cfg.Self }) {
			n++
		}
	}
	return n
}

// healRetry bounds the wait between two attempts of HealDamaged.
const (
	healRetryMin = 500 * time.Millisecond
	healRetryMax = 10 * time.Second
)

// HealDamaged repairs the ranges d marks damaged from their other replicas, and clears each
// range's mark once a repair session compared it with every replica answering and streamed
// what differed; it returns when no range is marked, or when ctx ends. ready says whether
// the node serves (its ring known, its first connections made): nothing starts before.
// Marks outside the ranges this node replicates are cleared at once (it holds nothing
// there), those of ranges with no other replica too (nothing to repair them from: the
// store then keeps saying so). A plan refused (a replica that does not answer, a ring
// change in flight) or a session already running is retried, the wait doubling from
// healRetryMin up to healRetryMax.
func (s *Service) HealDamaged(ctx context.Context, d Damaged, ready func() error) {
	wait := healRetryMin
	retry := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, healRetryMax)
		return true
	}
	for {
		if ready() != nil {
			if !retry() {
				return
			}
			continue
		}
		vnodes, err := s.damagedVnodes(d)
		if err != nil {
			s.cfg.Logger.Warn("damaged ranges", "err", err)
		}
		if len(vnodes) == 0 && err == nil {
			return
		}
		if len(vnodes) > 0 {
			s.cfg.Logger.Info("repairing damaged ranges from the peers", "ranges", len(vnodes))
			plan, err := s.Start(ctx, &kvpb.RepairRequest{NodeId: s.cfg.Self, Vnodes: vnodes})
			switch {
			case err != nil:
				s.cfg.Logger.Info("repair of damaged ranges not started: retrying", "err", err, "in", wait)
			case s.awaitSession(ctx, plan.GetId()):
				s.clearRepaired(d, plan.GetId())
				wait = healRetryMin
			}
		}
		if !retry() {
			return
		}
	}
}

// damagedVnodes clears the marks this node has nothing to repair from (see HealDamaged) and
// returns the vnodes (end tokens) of the marked ranges it replicates with other replicas;
// none while a ring change is in flight.
func (s *Service) damagedVnodes(d Damaged) ([]uint64, error) {
	v := s.cfg.View()
	if v == nil || v.Current == nil || v.Changing() {
		return nil, errRingUnsettled
	}
	cur := v.Current
	var out []uint64
	var errs []error
	for _, r := range cur.Ranges() {
		if !d.DamagedIn(r.Start, r.End) {
			continue
		}
		reps := cur.Lookup(r.End, cur.Replicas())
		mine := slices.ContainsFunc(reps, func(m ring.Member) bool { return m.ID == s.cfg.Self })
		switch {
		case !mine:
			errs = append(errs, d.ClearDamaged(r.Start, r.End, true))
		case len(reps) < 2:
			s.cfg.Logger.Error("damaged range has no other replica to repair it from: served as left", "range", fmtRange(r.Start, r.End))
			errs = append(errs, d.ClearDamaged(r.Start, r.End, false))
		default:
			out = append(out, r.End)
		}
	}
	return out, errors.Join(errs...)
}

// errRingUnsettled: no ring yet, or a ring change in flight; damaged ranges wait.
var errRingUnsettled = errors.New("ring not settled: no ring yet or a change in flight")

// awaitSession waits for session id to end; false when ctx ended first or another session
// replaced it.
func (s *Service) awaitSession(ctx context.Context, id uint64) bool {
	for {
		w := s.Watch()
		p := s.Progress()
		if p.GetId() != id {
			return false
		}
		if p.GetState() != kvpb.RepairState_REPAIR_STATE_RUNNING {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-w:
		}
	}
}

// clearRepaired clears the marks of session id's ranges that were repaired: compared with
// every replica answering (a failed range keeps its mark for the next attempt).
func (s *Service) clearRepaired(d Damaged, id uint64) {
	p := s.Progress()
	if p.GetId() != id {
		return
	}
	cleared := 0
	for _, r := range p.GetRanges() {
		if r.GetState() != kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE {
			continue
		}
		rr := r.GetRange()
		if err := d.ClearDamaged(rr.GetStart(), rr.GetEnd(), true); err != nil {
			s.cfg.Logger.Warn("clear damaged range", "range", fmtRange(rr.GetStart(), rr.GetEnd()), "err", err)
			continue
		}
		cleared++
	}
	s.cfg.Logger.Info("damaged ranges repaired from the peers", "repaired", cleared, "of", len(p.GetRanges()), "state", p.GetState().String())
}
