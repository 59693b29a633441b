package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"ringkv/node/ring"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// ChangeRequest asks for a ring change.
type ChangeRequest struct {
	// Kind is KindAdd, KindRemove or KindRebalance.
	Kind   string
	NodeID string
	// Tokens are the vnodes a rebalance hands over (chosen by the caller from measured load,
	// so that the leader journals the plan the operator saw).
	Tokens []ring.TokenMove
	// Addr is the newcomer's gRPC address (KindAdd only).
	Addr string
	// Force accepts a plan with refusals that forcing can override (fewer than N replicas).
	Force bool
	// RateBytes throttles streaming per receiver in bytes per second; 0 = unthrottled.
	RateBytes uint64
	// By is who asks; Prediction the plan's load per node before and after (nil: none).
	By         string
	Prediction *Prediction
}

// Plan is what a change would do, computed from this node's current ring.
type Plan struct {
	Request ChangeRequest
	Current *ring.Ring
	Next    *ring.Ring
	Moves   []ring.Move
	// Warnings are worth the operator's attention; Refusals stop the change unless forced
	// (a change already in flight stops it even then).
	Warnings []string
	Refusals []string
}

// Plan computes the plan of a change against this node's view, without raft. It fails with
// ErrNoRing, ErrMemberExists, ErrUnknownMember or ErrInvalidArgument when no plan exists.
func (c *Cluster) Plan(req ChangeRequest) (*Plan, error) {
	p := c.fsm.load()
	if p.view == nil || p.view.Current == nil {
		return nil, ErrNoRing
	}
	cur := p.view.Current
	plan := &Plan{Request: req, Current: cur}
	var err error
	switch req.Kind {
	case KindAdd:
		if req.NodeID == "" || req.Addr == "" {
			return nil, fmt.Errorf("add needs an id and an address: %w", ErrInvalidArgument)
		}
		for _, m := range cur.Members() {
			if m.ID == req.NodeID || m.Addr == req.Addr {
				return nil, fmt.Errorf("add %s=%s: %s=%s: %w", req.NodeID, req.Addr, m.ID, m.Addr, ErrMemberExists)
			}
		}
		weight := 1
		plan.Next, err = cur.WithMember(ring.Member{ID: req.NodeID, Addr: req.Addr, State: ring.StateJoining, Weight: weight}, c.cfg.Vnodes)
		if err != nil {
			return nil, fmt.Errorf("plan add %s: %w", req.NodeID, err)
		}
	case KindRemove:
		if _, ok := cur.Member(req.NodeID); !ok {
			return nil, fmt.Errorf("remove %s: %w", req.NodeID, ErrUnknownMember)
		}
		if n := len(cur.Members()) - 1; n < cur.ReplicationFactor() {
			plan.Refusals = append(plan.Refusals, fmt.Sprintf("only %d nodes would remain for %d replicas", n, cur.ReplicationFactor()))
		}
		plan.Next, err = cur.WithoutMember(req.NodeID)
		if err != nil {
			return nil, fmt.Errorf("plan remove %s: %w", req.NodeID, err)
		}
	case KindRebalance:
		if len(req.Tokens) == 0 {
			return nil, fmt.Errorf("rebalance needs the vnodes to move: %w", ErrInvalidArgument)
		}
		for _, tm := range req.Tokens {
			if m, ok := cur.Member(tm.To); ok && m.State != ring.StateUp {
				plan.Refusals = append(plan.Refusals, fmt.Sprintf("%s is %s", tm.To, m.State))
			}
		}
		plan.Next, err = cur.WithTokensMoved(req.Tokens)
		if err != nil {
			return nil, fmt.Errorf("plan rebalance: %w: %w", err, ErrInvalidArgument)
		}
	default:
		return nil, fmt.Errorf("change kind %q: %w", req.Kind, ErrInvalidArgument)
	}
	plan.Moves = ring.Plan(cur, plan.Next)
	if ch := p.change; ch != nil {
		plan.Refusals = append(plan.Refusals, fmt.Sprintf("change %d (%s %s) is in flight", ch.ID, ch.Kind, ch.NodeID))
	}
	return plan, nil
}

// Begin journals a ring change; called on a follower it forwards to the leader. It returns
// the change as this node has applied it. Errors: ErrChangeInFlight, ErrUnsafe (refusals
// without Force), ErrNoLeader, and Plan's.
func (c *Cluster) Begin(ctx context.Context, req ChangeRequest) (*Change, error) {
	var id uint64
	err := c.onLeader(ctx, func() error {
		var err error
		id, err = c.beginLocal(req)
		return err
	}, func(ctx context.Context, cl kvpb.ClusterClient) error {
		breq := &kvpb.BeginChangeRequest{
			Kind: req.Kind, NodeId: req.NodeID, GrpcAddr: req.Addr, Force: req.Force, RateBytes: req.RateBytes,
			TokenMoves: TokenMovesToProto(req.Tokens), By: req.By,
		}
		if req.Prediction != nil {
			var err error
			if breq.PredictionJson, err = json.Marshal(req.Prediction); err != nil {
				return fmt.Errorf("encode prediction: %w", err)
			}
		}
		resp, err := cl.BeginChange(ctx, breq)
		id = resp.GetChangeId()
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := c.waitApplied(ctx, id); err != nil {
		return nil, err
	}
	if ch := c.Change(); ch != nil && ch.ID == id {
		return ch, nil
	}
	return c.LastChange(), nil // already committed or aborted
}

func (c *Cluster) beginLocal(req ChangeRequest) (uint64, error) {
	if ch := c.fsm.load().change; ch != nil && ch.Kind == req.Kind && ch.NodeID == req.NodeID && ch.Addr == req.Addr && slices.Equal(ch.Tokens, req.Tokens) {
		// The same change is in flight: journaled by an earlier attempt of this request whose
		// answer was lost when leadership moved (Begin retries then).
		return ch.ID, nil
	}
	plan, err := c.Plan(req)
	if err != nil {
		return 0, err
	}
	if ch := c.fsm.load().change; ch != nil {
		return 0, fmt.Errorf("change %d: %w", ch.ID, ErrChangeInFlight)
	}
	if len(plan.Refusals) > 0 && !req.Force {
		return 0, fmt.Errorf("%s: %w", strings.Join(plan.Refusals, "; "), ErrUnsafe)
	}
	ch := &Change{
		Kind: req.Kind, NodeID: req.NodeID, Addr: req.Addr, Force: req.Force, RateBytes: req.RateBytes,
		Tokens: slices.Clone(req.Tokens),
		By:     req.By, Prediction: req.Prediction.clone(),
		FromEpoch: plan.Current.Epoch(),
		Next:      ringStateOf(plan.Next),
	}
	for _, m := range plan.Moves {
		ch.Moves = append(ch.Moves, MoveState{Start: m.Start, End: m.End, Source: m.Source, Target: m.Target})
	}
	now := time.Now()
	res, err := c.apply(command{Op: opBegin, Change: ch, Unix: now.Unix(), UnixMs: now.UnixMilli()})
	if err != nil {
		return 0, err
	}
	c.logger.Info("ring change begun", "change", res.changeID, "kind", req.Kind, "node", req.NodeID, "moves", len(ch.Moves))
	return res.changeID, nil
}

// Abort cancels the change in flight (changeID 0: whichever it is); the ring stays at its
// current epoch. Forwards to the leader. It returns once this node has applied the abort.
// ErrNoChange when none (or another) is in flight.
func (c *Cluster) Abort(ctx context.Context, changeID uint64) error {
	var applied uint64
	// The last change this node had finished before the call: the leader aborts a later one,
	// which this node may not even have seen begin yet.
	lastBefore := lastID(c.fsm.load().last)
	done, err := c.onLeaderOnce(ctx, ErrNoChange, func(ctx context.Context) bool { return c.abortedSince(ctx, lastBefore) }, func() error {
		now := time.Now()
		res, err := c.apply(command{Op: opAbort, ChangeID: changeID, Unix: now.Unix(), UnixMs: now.UnixMilli()})
		applied = res.changeID
		return err
	}, func(ctx context.Context, cl kvpb.ClusterClient) error {
		_, err := cl.AbortChange(ctx, &kvpb.AbortClusterChangeRequest{ChangeId: changeID})
		applied = changeID
		return err
	})
	if done {
		// Seen under load as "abort: change 0: no ring change in flight" right after a change
		// was seen streaming.
		return nil
	}
	if err != nil {
		return err
	}
	if applied != 0 {
		return c.waitDone(ctx, applied)
	}
	// Aborted on the leader, id unknown here: wait until this node has finished a change
	// later than lastBefore and has none of its own in flight up to it.
	return c.waitFor(ctx, func(p *published) bool {
		return p.last != nil && p.last.ID > lastBefore && (p.change == nil || p.change.ID > p.last.ID)
	})
}

// abortedSince is whether this node sees, within a couple of seconds, a change later than
// lastBefore that ended aborted.
func (c *Cluster) abortedSince(ctx context.Context, lastBefore uint64) bool {
	if !c.seesSoon(ctx, func(p *published) bool { return p.last != nil && p.last.ID > lastBefore }) {
		return false
	}
	last := c.fsm.load().last
	return last != nil && last.ID > lastBefore && last.Outcome == OutcomeAborted
}

// seesSoon is whether this node's copy of the state satisfies ok within a couple of seconds:
// how a call that onLeader retried, refused as if done already, looks for the work of its own
// earlier try, which the leader applied though its answer was lost (leadership moved, the
// leader's reply timed out). The copy may lag the leader that refused the retry.
func (c *Cluster) seesSoon(ctx context.Context, ok func(*published) bool) bool {
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return c.waitFor(wctx, ok) == nil
}

// MoveDone records that move index move of change changeID has reached its target. Idempotent.
// Forwards to the leader.
func (c *Cluster) MoveDone(ctx context.Context, changeID uint64, move int) error {
	return c.onLeader(ctx, func() error {
		_, err := c.apply(command{Op: opMoveDone, ChangeID: changeID, Move: move})
		return err
	}, func(ctx context.Context, cl kvpb.ClusterClient) error {
		_, err := cl.MoveDone(ctx, &kvpb.MoveDoneRequest{ChangeId: changeID, Move: uint32(move)})
		return err
	})
}

// SetRate changes the streaming throttle of the change in flight (bytes per second, 0 =
// unthrottled): the change's, or with nodeID that receiver's alone (ErrUnknownMember when it
// is in neither ring). Forwards to the leader; returns once this node has applied it.
func (c *Cluster) SetRate(ctx context.Context, nodeID string, rateBytes uint64) error {
	err := c.onLeader(ctx, func() error {
		_, err := c.apply(command{Op: opSetRate, NodeID: nodeID, RateBytes: rateBytes})
		return err
	}, func(ctx context.Context, cl kvpb.ClusterClient) error {
		_, err := cl.SetRate(ctx, &kvpb.SetRateRequest{RateBytes: rateBytes, NodeId: nodeID})
		return err
	})
	if err != nil {
		return err
	}
	return c.waitFor(ctx, func(p *published) bool {
		if p.change == nil {
			return true
		}
		if nodeID == "" {
			return p.change.RateBytes == rateBytes
		}
		r, ok := p.change.NodeRates[nodeID]
		return ok && r == rateBytes
	})
}

// SetParallel sets the pulls at once per receiver of the change in flight (at least 1).
// Forwards to the leader; returns once this node has applied it.
func (c *Cluster) SetParallel(ctx context.Context, parallel int) error {
	err := c.onLeader(ctx, func() error {
		_, err := c.apply(command{Op: opParallel, Parallel: parallel})
		return err
	}, func(ctx context.Context, cl kvpb.ClusterClient) error {
		_, err := cl.SetParallel(ctx, &kvpb.SetParallelRequest{Parallel: uint32(max(parallel, 0))})
		return err
	})
	if err != nil {
		return err
	}
	return c.waitFor(ctx, func(p *published) bool { return p.change == nil || p.change.Parallel == parallel })
}

// Pause journals a pause of the change in flight by who, for reason: its receivers stop
// pulling until Resume. ErrNothingToPause when no range streams, ErrAlreadyPaused. Forwards to
// the leader; returns once this node has applied it.
func (c *Cluster) Pause(ctx context.Context, by, reason string) error {
	// Pauses journaled before the call have an index at most this.
	before := c.fsm.load().index
	// Refused as paused already: the open pause may be this call's, from an earlier try.
	_, err := c.onLeaderOnce(ctx, ErrAlreadyPaused, func(ctx context.Context) bool {
		return c.seesSoon(ctx, func(p *published) bool {
			ps := p.change.Paused()
			return ps != nil && ps.Index > before && ps.By == by && ps.Reason == reason
		})
	}, func() error {
		_, err := c.apply(command{Op: opPause, By: by, Reason: reason, Unix: nowUnix()})
		return err
	}, func(ctx context.Context, cl kvpb.ClusterClient) error {
		_, err := cl.PauseChange(ctx, &kvpb.PauseClusterChangeRequest{By: by, Reason: reason})
		return err
	})
	if err != nil {
		return err
	}
	return c.waitFor(ctx, func(p *published) bool { return p.change == nil || p.change.Paused() != nil })
}

// Resume journals the end of the change's pause by who. ErrNotPaused when none is paused.
// Forwards to the leader; returns once this node has applied it.
func (c *Cluster) Resume(ctx context.Context, by string) error {
	// Resumes journaled before the call have an index at most this.
	before := c.fsm.load().index
	// Refused as not paused: an earlier try may have resumed it. Seen under load as "resume:
	// no ring change is paused" right after a pause was seen applied.
	_, err := c.onLeaderOnce(ctx, ErrNotPaused, func(ctx context.Context) bool {
		return c.seesSoon(ctx, func(p *published) bool {
			// The change may have finished since: look at the last one too.
			return resumedSince(p.change, by, before) || resumedSince(p.last, by, before)
		})
	}, func() error {
		_, err := c.apply(command{Op: opResume, By: by, Unix: nowUnix()})
		return err
	}, func(ctx context.Context, cl kvpb.ClusterClient) error {
		_, err := cl.ResumeChange(ctx, &kvpb.ResumeClusterChangeRequest{By: by})
		return err
	})
	if err != nil {
		return err
	}
	return c.waitFor(ctx, func(p *published) bool { return p.change == nil || p.change.Paused() == nil })
}

// resumedSince is whether ch's last pause was resumed by by at a raft index above before.
func resumedSince(ch *Change, by string, before uint64) bool {
	if ch == nil || len(ch.Pauses) == 0 {
		return false
	}
	p := ch.Pauses[len(ch.Pauses)-1]
	return p.ResumedIndex > before && p.ResumedBy == by
}

// commit flips the ring to the change's next epoch; leader only (Run calls it).
func (c *Cluster) commit(changeID uint64) error {
	now := time.Now()
	_, err := c.apply(command{Op: opCommit, ChangeID: changeID, Unix: now.Unix(), UnixMs: now.UnixMilli()})
	if err == nil {
		c.logger.Info("ring change committed", "change", changeID, "epoch", c.Epoch())
	}
	return err
}

// apply proposes cmd on this node, which must lead, and returns the FSM's answer.
func (c *Cluster) apply(cmd command) (applyResult, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return applyResult{}, fmt.Errorf("encode %s: %w", cmd.Op, err)
	}
	f := c.raft.Apply(b, c.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		return applyResult{}, raftErr(cmd.Op, err)
	}
	res, _ := f.Response().(applyResult)
	return res, res.err
}

func raftErr(op string, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%s: %w: %w", op, ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%s: %w", op, ErrClosed)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// onLeader runs local when this node leads, else remote against the leader's Cluster service,
// retrying while no leader is known or leadership moves, until ctx ends.
func (c *Cluster) onLeader(ctx context.Context, local func() error, remote func(context.Context, kvpb.ClusterClient) error) error {
	backoff := 20 * time.Millisecond
	for {
		var err error
		id, addr := c.Leader()
		switch {
		case c.IsLeader():
			err = local()
		case id == "" || addr == "":
			err = ErrNoLeader
		default:
			var cl kvpb.ClusterClient
			cl, err = c.clients.get(addr)
			if err == nil {
				err = rpcerr.Decode(remote(ctx, cl))
			}
			if err != nil && isUnavailable(err) {
				err = fmt.Errorf("leader %s at %s: %w: %w", id, addr, ErrNoLeader, err)
			}
		}
		if err == nil || !(errors.Is(err, ErrNoLeader) || errors.Is(err, ErrNotLeader)) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// onLeaderOnce is onLeader for a call that the leader refuses with refusal once it is done.
// When a try after the first is refused so, an earlier try may have been applied though its
// answer was lost (leadership moved, the leader's reply timed out): applied tells, and then
// the call succeeds (done, nil).
func (c *Cluster) onLeaderOnce(ctx context.Context, refusal error, applied func(context.Context) bool,
	local func() error, remote func(context.Context, kvpb.ClusterClient) error) (done bool, err error) {
	tries := 0
	err = c.onLeader(ctx, func() error {
		tries++
		return local()
	}, func(ctx context.Context, cl kvpb.ClusterClient) error {
		tries++
		return remote(ctx, cl)
	})
	if errors.Is(err, refusal) && tries > 1 && applied(ctx) {
		return true, nil
	}
	return false, err
}

// waitApplied waits until this node's copy of the state has seen change id begin.
func (c *Cluster) waitApplied(ctx context.Context, id uint64) error {
	return c.waitFor(ctx, func(p *published) bool {
		return (p.change != nil && p.change.ID >= id) || (p.last != nil && p.last.ID >= id)
	})
}

// waitDone waits until this node's copy has seen change id leave flight.
func (c *Cluster) waitDone(ctx context.Context, id uint64) error {
	return c.waitFor(ctx, func(p *published) bool {
		return (p.change == nil || p.change.ID > id) && (id == 0 || (p.last != nil && p.last.ID >= id))
	})
}

func (c *Cluster) waitFor(ctx context.Context, ok func(*published) bool) error {
	for {
		ch := c.Watch()
		if ok(c.fsm.load()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for ring state: %w", ctx.Err())
		}
	}
}

// reconcile performs the leader's duties once.
func (c *Cluster) reconcile(ctx context.Context) error {
	p := c.fsm.load()
	if !p.journaled {
		if c.founder == nil {
			return nil
		}
		st := ringStateOf(c.founder)
		_, err := c.apply(command{Op: opBootstrap, Ring: &st})
		if err == nil {
			c.logger.Info("journaled the founders' ring", "epoch", st.Epoch, "members", len(st.Members))
		}
		return err
	}
	var errs []error
	if err := c.reconcileMembers(p); err != nil {
		errs = append(errs, err)
	}
	if ch := p.change; ch != nil && ch.Pending() == 0 && ctx.Err() == nil {
		if err := c.commit(ch.ID); err != nil {
			errs = append(errs, fmt.Errorf("commit change %d: %w", ch.ID, err))
		}
	}
	return errors.Join(errs...)
}

// reconcileMembers makes raft's configuration follow the ring: members of the current ring
// join raft as non-voters, and the leader keeps Voters(members, MaxVoters) of them voting —
// promoting live non-voters (lowest id first) when voters are missing, left, or have missed its
// heartbeats for DeadVoterAfter, and demoting the voters beyond that number (dead ones first);
// a newcomer of the change in flight is a non-voter; servers in neither ring are removed
// after RemoveGrace (this node last).
func (c *Cluster) reconcileMembers(p *published) error {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("raft configuration: %w", err)
	}
	conf := f.Configuration()
	inConf := map[string]raft.Server{}
	for _, s := range conf.Servers {
		inConf[string(s.ID)] = s
	}
	current := p.view.Current.Members()
	desired := map[string]ring.Member{}
	for _, m := range current {
		desired[m.ID] = m
	}
	var newcomers []ring.Member
	if p.view.Next != nil {
		for _, m := range p.view.Next.Members() {
			if _, ok := desired[m.ID]; !ok {
				desired[m.ID] = m
				newcomers = append(newcomers, m)
			}
		}
	}
	to := c.cfg.ApplyTimeout
	var errs []error
	for _, m := range append(slices.Clone(current), newcomers...) {
		if _, ok := inConf[m.ID]; ok {
			continue
		}
		if err := c.raft.AddNonvoter(raft.ServerID(m.ID), raft.ServerAddress(m.Addr), 0, to).Error(); err != nil {
			errs = append(errs, fmt.Errorf("add non-voter %s: %w", m.ID, err))
			continue
		}
		inConf[m.ID] = raft.Server{ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Addr), Suffrage: raft.Nonvoter}
		c.logger.Info("raft non-voter added", "id", m.ID, "addr", m.Addr)
	}
	errs = append(errs, c.placeVoters(current, inConf)...)

	var gone []raft.ServerID
	now := time.Now()
	for _, s := range conf.Servers {
		id := string(s.ID)
		if _, ok := desired[id]; ok {
			delete(c.departed, id)
			continue
		}
		since, ok := c.departed[id]
		if !ok {
			c.departed[id] = now
			continue
		}
		if now.Sub(since) >= c.cfg.RemoveGrace {
			gone = append(gone, s.ID)
		}
	}
	// This node last: removing itself ends its leadership.
	slices.SortStableFunc(gone, func(a, b raft.ServerID) int {
		return boolInt(string(a) == c.cfg.ID) - boolInt(string(b) == c.cfg.ID)
	})
	for _, id := range gone {
		if err := c.raft.RemoveServer(id, 0, to).Error(); err != nil {
			errs = append(errs, fmt.Errorf("remove raft server %s: %w", id, err))
			continue
		}
		delete(c.departed, string(id))
		c.logger.Info("raft server removed", "id", id)
	}
	return errors.Join(errs...)
}

// placeVoters promotes and demotes members of the current ring so that Voters(len(current),
// MaxVoters) live members vote. inConf is raft's configuration by id.
func (c *Cluster) placeVoters(current []ring.Member, inConf map[string]raft.Server) []error {
	target := Voters(len(current), c.cfg.MaxVoters)
	dead := func(id string) bool {
		return id != c.cfg.ID && c.cfg.DeadVoterAfter > 0 && c.silent.longerThan(id, c.cfg.DeadVoterAfter)
	}
	var live, deadVoters, candidates []ring.Member
	for _, m := range current { // sorted by id
		s, ok := inConf[m.ID]
		switch {
		case !ok:
		case s.Suffrage == raft.Voter && dead(m.ID):
			deadVoters = append(deadVoters, m)
		case s.Suffrage == raft.Voter:
			live = append(live, m)
		case !dead(m.ID):
			candidates = append(candidates, m)
		}
	}
	to := c.cfg.ApplyTimeout
	var errs []error
	for len(live) < target && len(candidates) > 0 {
		m := candidates[0]
		candidates = candidates[1:]
		// AddVoter promotes a non-voter.
		if err := c.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.Addr), 0, to).Error(); err != nil {
			errs = append(errs, fmt.Errorf("promote %s to voter: %w", m.ID, err))
			continue
		}
		live = append(live, m)
		c.logger.Info("raft voter added", "id", m.ID, "addr", m.Addr, "voters", len(live), "target", target)
	}
	// Beyond the target: the dead voters first (once enough live ones vote), then the live
	// ones with the highest ids, never this node (the leader).
	var extra []ring.Member
	if len(live) >= target {
		extra = deadVoters
	}
	surplus := len(live) - target
	for i := len(live) - 1; i >= 0 && surplus > 0; i-- {
		if live[i].ID == c.cfg.ID {
			continue
		}
		extra = append(extra, live[i])
		surplus--
	}
	for _, m := range extra {
		if err := c.raft.DemoteVoter(raft.ServerID(m.ID), 0, to).Error(); err != nil {
			errs = append(errs, fmt.Errorf("demote voter %s: %w", m.ID, err))
			continue
		}
		c.logger.Info("raft voter demoted to non-voter", "id", m.ID, "dead", slices.ContainsFunc(deadVoters, func(d ring.Member) bool { return d.ID == m.ID }), "target", target)
	}
	return errs
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nowUnix() int64 { return time.Now().Unix() }

// TokenMovesToProto converts a rebalance's vnode moves to their wire form.
func TokenMovesToProto(ts []ring.TokenMove) []*kvpb.TokenMove {
	var out []*kvpb.TokenMove
	for _, t := range ts {
		out = append(out, &kvpb.TokenMove{Token: t.Token, From: t.From, To: t.To})
	}
	return out
}

// TokenMovesFromProto converts a rebalance's vnode moves from their wire form.
func TokenMovesFromProto(ts []*kvpb.TokenMove) []ring.TokenMove {
	var out []ring.TokenMove
	for _, t := range ts {
		out = append(out, ring.TokenMove{Token: t.GetToken(), From: t.GetFrom(), To: t.GetTo()})
	}
	return out
}
