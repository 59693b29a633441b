package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"ringkv/node/cluster"
	"ringkv/node/heat"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// What the heat history's events are drawn from: the ring-change journal (every node reads
// it, so every node keeps its changes), the repair sessions this node coordinates, and the
// peers this node cannot reach. eventState is one look at them; heatEvents compares two.
type eventState struct {
	epoch  uint64
	change *cluster.Change // in flight, nil when none
	last   *cluster.Change // the last one settled
	repair *kvpb.RepairProgress
	down   []string  // peers unreachable from this node, sorted
	at     time.Time // when this node looked (zero: unknown)
}

// eventPoll is how often watchEvents looks at the peers' reachability (the journal and the
// repair sessions wake it as they change).
const eventPoll = time.Second

// watchEvents adds an event to the heat history whenever the ring, a ring change, a repair
// session or a peer's reachability changes, until ctx ends.
func (n *Node) watchEvents(ctx context.Context) {
	tick := time.NewTicker(eventPoll)
	defer tick.Stop()
	now := n.cfg.Now
	if now == nil {
		now = time.Now
	}
	prev := n.eventState()
	prev.at = now()
	var owned uint64 // the ring epoch whose owners the history holds
	for {
		cw, rw := n.cl.Watch(), n.repairs.Watch()
		if r := n.currentRing(); r != nil && r.Epoch() != owned {
			n.heat.SetOwners(bucketOwners(r))
			owned = r.Epoch()
		}
		cur := n.eventState()
		cur.at = now()
		for _, e := range heatEvents(prev, cur, cur.at) {
			n.heat.AddEventAt(e.Time, e.Kind, e.Text)
		}
		prev = cur
		select {
		case <-ctx.Done():
			return
		case <-cw:
		case <-rw:
		case <-tick.C:
		}
	}
}

// bucketOwners names the owner of each heat bucket in r: the member owning the most of the
// bucket's tokens (a bucket holds 2^56 tokens, a vnode of a 64-vnode node of a 3-node ring
// about 2^55: most buckets have one or two owners).
func bucketOwners(r *ring.Ring) [heat.Buckets]string {
	var share [heat.Buckets]map[string]uint64
	add := func(b int, id string, n uint64) {
		if share[b] == nil {
			share[b] = map[string]uint64{}
		}
		share[b][id] += n
	}
	// Each vnode covers (start, end], wrapping past the top when start >= end (one vnode: all).
	span := func(lo, hi uint64, id string) { // [lo, hi]
		for b := heat.Bucket(lo); b <= heat.Bucket(hi); b++ {
			first, last := heat.BucketRange(b)
			add(b, id, min(hi, last)-max(lo, first)+1)
		}
	}
	for _, rg := range r.Ranges() {
		if rg.Start < rg.End {
			span(rg.Start+1, rg.End, rg.Owner)
			continue
		}
		if rg.Start != ^uint64(0) {
			span(rg.Start+1, ^uint64(0), rg.Owner)
		}
		span(0, rg.End, rg.Owner)
	}
	var out [heat.Buckets]string
	for b, m := range share {
		var best uint64
		for _, id := range slices.Sorted(maps.Keys(m)) {
			if m[id] > best {
				out[b], best = id, m[id]
			}
		}
	}
	return out
}

func (n *Node) eventState() eventState {
	s := eventState{epoch: n.epoch(), change: n.cl.Change(), last: n.cl.LastChange(), repair: n.repairs.LocalProgress()}
	// Until every peer was tried once, a peer not yet connected is not one lost.
	if n.coord != nil && n.warm.Load() {
		s.down = n.coord.Unreachable()
		slices.Sort(s.down)
	}
	return s
}

// heatEvents are the events between two looks, stamped with the time the cluster gave them
// when it did (a change's start and end, a repair's) and now otherwise.
func heatEvents(prev, cur eventState, now time.Time) []heat.Event {
	var out []heat.Event
	add := func(unix int64, kind, format string, a ...any) {
		// The cluster stamps whole seconds: within the second seen, now is the finer time.
		// Truncated, a stamp can fall before the look that had not yet seen the event, and
		// before events seen then that came first (a change begun, its rate changed and
		// aborted within one second read begin, abort, rate): not before that look.
		at := now
		if unix > 0 && unix != now.Unix() {
			at = time.Unix(unix, 0)
			if !prev.at.IsZero() && !at.After(prev.at) {
				at = prev.at.Add(time.Nanosecond)
			}
		}
		out = append(out, heat.Event{Time: at, Kind: kind, Text: fmt.Sprintf(format, a...)})
	}
	// Ring changes: begun, its pace changed, settled one way or the other.
	p, c := prev.change, cur.change
	if c != nil && (p == nil || p.ID != c.ID) {
		add(c.StartedUnix, heat.KindChangeBegin, "ring change %d begun: %s, %s", c.ID, describeChange(c), kvpb.FormatByteRate(c.RateBytes))
	}
	if c != nil && p != nil && p.ID == c.ID && p.RateBytes != c.RateBytes {
		add(0, heat.KindRate, "ring change %d rate %s → %s", c.ID, kvpb.FormatByteRate(p.RateBytes), kvpb.FormatByteRate(c.RateBytes))
	}
	if c != nil && p != nil && p.ID == c.ID {
		for _, id := range slices.Sorted(maps.Keys(c.NodeRates)) {
			if was, ok := p.NodeRates[id]; !ok || was != c.NodeRates[id] {
				add(0, heat.KindRate, "ring change %d rate of %s %s → %s", c.ID, id, kvpb.FormatByteRate(p.RateFor(id)), kvpb.FormatByteRate(c.NodeRates[id]))
			}
		}
	}
	// Pauses and resumes, stamped by the leader that journaled them.
	if c != nil {
		var seen []cluster.Pause
		if p != nil && p.ID == c.ID {
			seen = p.Pauses
		}
		for i, ps := range c.Pauses {
			if i >= len(seen) {
				add(ps.Unix, heat.KindChangePause, "ring change %d paused by %s", c.ID, ps.By)
			}
			if ps.ResumedUnix != 0 && (i >= len(seen) || seen[i].ResumedUnix == 0) {
				add(ps.ResumedUnix, heat.KindChangeResume, "ring change %d resumed by %s", c.ID, ps.ResumedBy)
			}
		}
	}
	if l := cur.last; l != nil && (prev.last == nil || prev.last.ID != l.ID) {
		switch l.Outcome {
		case cluster.OutcomeCommitted:
			add(l.FinishedUnix, heat.KindChangeCommit, "ring change %d committed: %s, epoch %d", l.ID, describeChange(l), l.Next.Epoch)
		case cluster.OutcomeAborted:
			add(l.FinishedUnix, heat.KindChangeAbort, "ring change %d aborted: %s", l.ID, describeChange(l))
		}
	}
	if prev.epoch != 0 && cur.epoch != prev.epoch {
		add(0, heat.KindRing, "ring epoch %d → %d", prev.epoch, cur.epoch)
	}
	// Repair sessions this node coordinates.
	pr, r := prev.repair, cur.repair
	newSession := r.GetId() != 0 && r.GetId() != pr.GetId()
	if r.GetState().InFlight() && (newSession || !pr.GetState().InFlight()) {
		add(r.GetStartedUnix(), heat.KindRepairStart, "repair %d started on %s, %s", r.GetId(), r.GetCoordinator(), kvpb.FormatByteRate(r.GetRateLimitBytes()))
	}
	if r.GetState().InFlight() && !newSession && pr.GetRateLimitBytes() != r.GetRateLimitBytes() {
		add(0, heat.KindRate, "repair %d rate %s → %s", r.GetId(), kvpb.FormatByteRate(pr.GetRateLimitBytes()), kvpb.FormatByteRate(r.GetRateLimitBytes()))
	}
	if r.GetState().InFlight() && !newSession {
		switch op, np := pr.GetPaused(), r.GetPaused(); {
		case op == nil && np != nil:
			add(np.GetPausedUnix(), heat.KindRepairPause, "repair %d paused by %s", r.GetId(), np.GetBy())
		case op != nil && np == nil:
			add(0, heat.KindRepairResume, "repair %d resumed", r.GetId())
		}
	}
	if r.GetState().Finished() && (newSession || pr.GetState().InFlight()) {
		add(r.GetFinishedUnix(), heat.KindRepairEnd, "repair %d %s: %d keys repaired", r.GetId(), repairOutcome(r.GetState()), r.GetKeysStreamed())
	}
	// Peers this node lost or found again.
	for _, id := range cur.down {
		if !slices.Contains(prev.down, id) {
			add(0, heat.KindNodeDown, "node %s DOWN (unreachable)", id)
		}
	}
	for _, id := range prev.down {
		if !slices.Contains(cur.down, id) {
			add(0, heat.KindNodeUp, "node %s UP (reachable again)", id)
		}
	}
	return out
}

func describeChange(c *cluster.Change) string {
	if c.NodeID == "" {
		return c.Kind
	}
	return c.Kind + " " + c.NodeID
}

func repairOutcome(s kvpb.RepairState) string {
	switch s {
	case kvpb.RepairState_REPAIR_STATE_DONE:
		return "done"
	case kvpb.RepairState_REPAIR_STATE_FAILED:
		return "failed"
	case kvpb.RepairState_REPAIR_STATE_ABORTED:
		return "aborted"
	}
	return "ended"
}
