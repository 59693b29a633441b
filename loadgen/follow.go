package loadgen

import (
	"context"
	"fmt"
	"sync"
	"time"

	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// FollowInterval is how often Follow asks the cluster's status (members, epoch, repairs)
// and, while no change is in flight, for the last change; a change in flight is watched
// (WatchChange) every followWatch.
const (
	FollowInterval = time.Second
	followWatch    = 200 * time.Millisecond
)

// Follow records in log what happens in the cluster that admin answers for, until ctx ends
// or stop is called (stop waits for its goroutines): a ring change's begin, first chunk,
// hand-over, commit or abort and rate changes (WatchChange); members going DOWN and coming
// back, the ring's epoch, repair sessions starting and ending (Status every
// FollowInterval). Each event is stamped with the time this process saw it, so it lags
// the cluster by up to the interval of its source.
//
// The first Status is asked before Follow returns: when it fails (the node refuses admin
// calls, or does not answer) Follow returns its error and records nothing.
func Follow(ctx context.Context, admin kvpb.AdminClient, log *EventLog) (stop func(), err error) {
	f := &follower{admin: admin, log: log, now: time.Now, start: time.Now(), nodes: map[string]kvpb.NodeState{},
		repairs: map[string]bool{}}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	st, err := admin.Status(cctx, &kvpb.StatusRequest{})
	cancel()
	if err != nil {
		return nil, err
	}
	f.observeStatus(st, true)
	ctx, cancel = context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { f.pollStatus(ctx) })
	wg.Go(func() { f.watchChanges(ctx) })
	return func() { cancel(); wg.Wait() }, nil
}

// follower holds what Follow has seen; mu guards it (the status poller and the change
// watcher both observe changes).
type follower struct {
	admin kvpb.AdminClient
	log   *EventLog
	now   func() time.Time
	start time.Time

	mu      sync.Mutex
	change  seenChange
	nodes   map[string]kvpb.NodeState
	epoch   uint64
	repairs map[string]bool // coordinator/id of the sessions running
}

// seenChange is the last ring change seen and how far it had come.
type seenChange struct {
	id     uint64
	state  kvpb.ChangeState
	chunk  bool
	rate   uint64
	paused bool
}

// changePaused is the state of a change the operator paused.
const changePaused = kvpb.ChangeState_CHANGE_STATE_PAUSED

func (f *follower) add(kind EventKind, node, text string) {
	f.log.Add(Event{At: f.now(), Kind: kind, Node: node, Text: text})
}

func (f *follower) pollStatus(ctx context.Context) {
	t := time.NewTicker(FollowInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, FollowInterval*3)
		st, err := f.admin.Status(cctx, &kvpb.StatusRequest{})
		cancel()
		if err == nil {
			f.observeStatus(st, false)
		}
	}
}

// watchChanges follows the change in flight (or the last one) with WatchChange; the stream
// ends with the change's final state, or at once when none is in flight, and is opened again
// a FollowInterval later.
func (f *follower) watchChanges(ctx context.Context) {
	for ctx.Err() == nil {
		if stream, err := f.admin.WatchChange(ctx, &kvpb.ChangeStatusRequest{IntervalMs: uint32(followWatch / time.Millisecond)}); err == nil {
			for {
				p, err := stream.Recv()
				if err != nil {
					break // the final state was sent (EOF), or the node went away: asked again below
				}
				f.observeChange(p, false)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(FollowInterval):
		}
	}
}

// observeStatus records members going DOWN and back UP, the epoch's moves, repairs starting
// and ending, and the change in flight. The first status (baseline) records only a change
// already in flight.
func (f *follower) observeStatus(st *kvpb.StatusResponse, baseline bool) {
	if c := st.GetChange(); c != nil {
		f.observeChange(c, baseline)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := st.GetEpoch(); e != f.epoch {
		if !baseline && e > f.epoch {
			f.add(EventEpoch, "", fmt.Sprintf("ring epoch %d -> %d", f.epoch, e))
		}
		f.epoch = e
	}
	for _, n := range st.GetNodes() {
		s, was := n.GetState(), f.nodes[n.GetId()]
		f.nodes[n.GetId()] = s
		if baseline || s == was {
			continue
		}
		switch {
		case s == kvpb.NodeState_NODE_STATE_DOWN:
			text := n.GetId() + " " + present.NodeState(s)
			if n.GetError() != "" {
				text += ": " + n.GetError()
			}
			f.add(EventNodeDown, n.GetId(), text)
		case was == kvpb.NodeState_NODE_STATE_DOWN:
			f.add(EventNodeUp, n.GetId(), n.GetId()+" "+present.NodeState(s))
		}
	}
	running := map[string]bool{}
	for _, r := range st.GetRepairs() {
		if !r.GetState().InFlight() {
			continue
		}
		key := fmt.Sprintf("%s/%d", r.GetCoordinator(), r.GetId())
		running[key] = true
		if !f.repairs[key] && !baseline {
			f.add(EventRepairStart, r.GetCoordinator(), fmt.Sprintf("repair %d on %s: %s", r.GetId(), r.GetCoordinator(), present.Repair(r.GetPlan().GetRequest())))
		}
	}
	for key := range f.repairs {
		if !running[key] {
			f.add(EventRepairEnd, "", "repair "+key+" ended")
		}
	}
	f.repairs = running
}

// observeChange records the steps of the change p reports. A change first seen in flight
// begins now (at baseline: it was in flight when the run began); one first seen finished
// began and ended between two looks when it finished after Follow started, and is old
// otherwise (nothing recorded).
func (f *follower) observeChange(p *kvpb.ChangeProgress, baseline bool) {
	if p.GetId() == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &f.change
	st := p.GetState()
	what := present.Change(p.GetPlan().GetRequest())
	node := p.GetPlan().GetRequest().GetNodeId()
	if p.GetId() != c.id {
		*c = seenChange{id: p.GetId(), rate: p.GetRateLimitBytes()}
		inFlight := st.InFlight()
		switch {
		case inFlight && baseline:
			f.add(EventChangeBegin, node, what+" (in flight when the run began)")
		case inFlight || p.GetFinishedUnix() >= f.start.Unix():
			f.add(EventChangeBegin, node, what)
		default:
			*c = seenChange{id: p.GetId(), state: st, chunk: true, rate: p.GetRateLimitBytes()}
			return
		}
	}
	if !c.chunk && (p.GetKeysDone() > 0 || p.GetBytesDone() > 0) {
		c.chunk = true
		f.add(EventFirstChunk, node, what+": first records streamed")
	}
	if r := p.GetRateLimitBytes(); r != c.rate {
		f.add(EventRate, node, fmt.Sprintf("%s: streaming rate %s -> %s", what, rateWord(c.rate), rateWord(r)))
		c.rate = r
	}
	if paused := st == changePaused; paused != c.paused && !st.Finished() {
		c.paused = paused
		text := what + " resumed"
		if paused {
			text = what + " paused"
		}
		if ps := p.GetPauses(); len(ps) > 0 {
			last := ps[len(ps)-1]
			switch {
			case paused && last.GetReason() != "":
				text += " by " + last.GetBy() + ": " + last.GetReason()
			case paused:
				text += " by " + last.GetBy()
			case last.GetResumedBy() != "":
				text += " by " + last.GetResumedBy()
			}
		}
		kind := EventResume
		if paused {
			kind = EventPause
		}
		f.add(kind, node, text)
	}
	if stateRank(st) <= stateRank(c.state) {
		return // no step, or an older look (the status poller's) than the watcher's
	}
	c.state = st
	switch st {
	case kvpb.ChangeState_CHANGE_STATE_HANDING_OVER:
		f.add(EventHandOver, node, fmt.Sprintf("%s: every range streamed, handing over to epoch %d", what, p.GetPlan().GetToEpoch()))
	case kvpb.ChangeState_CHANGE_STATE_DONE:
		f.add(EventCommit, node, fmt.Sprintf("%s committed: epoch %d", what, p.GetPlan().GetToEpoch()))
	case kvpb.ChangeState_CHANGE_STATE_ABORTED:
		text := what + " aborted"
		if p.GetError() != "" {
			text += ": " + p.GetError()
		}
		f.add(EventAbort, node, text)
	}
}

func rateWord(bps uint64) string {
	if bps == 0 {
		return "default"
	}
	return present.Rate(float64(bps))
}

// stateRank orders a change's states as it goes through them.
func stateRank(s kvpb.ChangeState) int {
	switch s {
	case kvpb.ChangeState_CHANGE_STATE_STREAMING, changePaused:
		return 1
	case kvpb.ChangeState_CHANGE_STATE_HANDING_OVER:
		return 2
	case kvpb.ChangeState_CHANGE_STATE_DONE, kvpb.ChangeState_CHANGE_STATE_ABORTED:
		return 3
	}
	return 0
}
