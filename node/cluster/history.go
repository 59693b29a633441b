package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"ringkv/node/ring"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// MaxHistory is how many finished ring changes the history keeps (the oldest go first).
const MaxHistory = 32

// Sentinel errors of the change history.
var (
	// ErrUnknownChange: the change asked for is not in the history.
	ErrUnknownChange = rpcerr.New(kvpb.Reason_REASON_UNKNOWN_CHANGE, "no such ring change in the history")
	// ErrNoHistory: no ring change has finished yet.
	ErrNoHistory = rpcerr.New(kvpb.Reason_REASON_NO_HISTORY, "no ring change has finished yet")
)

// Observation states of a finished change's load prediction.
const (
	ObservationObserving   = "observing"
	ObservationObserved    = "observed"
	ObservationNotObserved = "not_observed"
)

// NodeLoad is one node's replica load (reads plus writes served as a replica, per second):
// measured before a change, predicted after it, and observed after it.
type NodeLoad struct {
	ID        string  `json:"id"`
	Before    float64 `json:"before"`
	Predicted float64 `json:"predicted"`
	Observed  float64 `json:"observed,omitempty"`
	// HasObserved: Observed holds a figure.
	HasObserved bool `json:"has_observed,omitempty"`
	// Note says why there is no observed figure.
	Note string `json:"note,omitempty"`
}

// Prediction is what a change's plan predicted, journaled with the change when it begins.
type Prediction struct {
	Nodes []NodeLoad `json:"nodes"`
	// DelayMs after the commit, the observation window of WindowMs starts.
	DelayMs  int64 `json:"delay_ms"`
	WindowMs int64 `json:"window_ms"`
	// EstBytes is what the plan estimated to stream; Vnodes the vnodes a rebalance hands over.
	EstBytes uint64 `json:"est_bytes,omitempty"`
}

// LoadSample is every member's replica load counter at one time: the sum of its per-vnode
// read and write totals (kvpb.VnodeStats), which count up while the ring's epoch stays.
type LoadSample struct {
	UnixMs int64             `json:"unix_ms"`
	Epoch  uint64            `json:"epoch"`
	Totals map[string]uint64 `json:"totals"`
	// Missing are the members that did not answer, with why.
	Missing map[string]string `json:"missing,omitempty"`
}

// ChangeRecord is one finished change in the history, with its load prediction and what
// was observed.
type ChangeRecord struct {
	ID             uint64 `json:"id"`
	Kind           string `json:"kind"`
	NodeID         string `json:"node_id,omitempty"`
	By             string `json:"by,omitempty"`
	Outcome        string `json:"outcome"`
	StartedUnixMs  int64  `json:"started_unix_ms"`
	FinishedUnixMs int64  `json:"finished_unix_ms"`
	EstBytes       uint64 `json:"est_bytes,omitempty"`
	Vnodes         int    `json:"vnodes,omitempty"`
	Ranges         int    `json:"ranges"`
	// Observation is ObservationObserving until the leader journals what it observed.
	Observation     string     `json:"observation"`
	ObservationNote string     `json:"observation_note,omitempty"`
	ObserveFromMs   int64      `json:"observe_from_ms,omitempty"`
	ObserveToMs     int64      `json:"observe_to_ms,omitempty"`
	Nodes           []NodeLoad `json:"nodes,omitempty"`
	// Start is the load sample the observation window starts from, once taken.
	Start *LoadSample `json:"start,omitempty"`
}

// History is the journal of finished changes, oldest first.
type History struct {
	Records []ChangeRecord `json:"records"`
}

func (h *History) clone() *History {
	if h == nil {
		return nil
	}
	out := &History{Records: slices.Clone(h.Records)}
	for i := range out.Records {
		r := &out.Records[i]
		r.Nodes = slices.Clone(r.Nodes)
		if r.Start != nil {
			s := *r.Start
			s.Totals, s.Missing = maps.Clone(s.Totals), maps.Clone(s.Missing)
			r.Start = &s
		}
	}
	return out
}

// record returns the record of change id, nil when not kept.
func (h *History) record(id uint64) *ChangeRecord {
	if h == nil {
		return nil
	}
	for i := range h.Records {
		if h.Records[i].ID == id {
			return &h.Records[i]
		}
	}
	return nil
}

// recordFinished appends the record of ch, which has just left flight at unixMs.
func (st *fsmState) recordFinished(ch *Change, unixMs int64) {
	if st.History == nil {
		st.History = &History{}
	}
	r := ChangeRecord{
		ID: ch.ID, Kind: ch.Kind, NodeID: ch.NodeID, By: ch.By, Outcome: ch.Outcome,
		StartedUnixMs: ch.StartedUnix * 1000, FinishedUnixMs: unixMs,
		Vnodes: len(ch.Tokens), Ranges: len(ch.Moves),
		Observation: ObservationNotObserved,
	}
	if ch.StartedUnixMs != 0 {
		r.StartedUnixMs = ch.StartedUnixMs
	}
	if p := ch.Prediction; p != nil {
		r.EstBytes = p.EstBytes
		r.Nodes = slices.Clone(p.Nodes)
		switch {
		case ch.Outcome != OutcomeCommitted:
			r.ObservationNote = "aborted: the ring did not change"
		case p.WindowMs <= 0:
			r.ObservationNote = "no observation window"
		default:
			r.Observation = ObservationObserving
			r.ObserveFromMs = unixMs + p.DelayMs
			r.ObserveToMs = r.ObserveFromMs + p.WindowMs
		}
	} else {
		r.ObservationNote = "no prediction: the plan measured no load"
	}
	// A change still observing when a later one commits cannot be observed: the later one
	// moves the load it would measure.
	for i := range st.History.Records {
		o := &st.History.Records[i]
		if o.Observation == ObservationObserving {
			o.Observation, o.ObservationNote, o.Start = ObservationNotObserved, fmt.Sprintf("change %d finished before the window ended", ch.ID), nil
		}
	}
	st.History.Records = append(st.History.Records, r)
	if n := len(st.History.Records) - MaxHistory; n > 0 {
		st.History.Records = slices.Delete(st.History.Records, 0, n)
	}
}

// observeCmd is the leader's journal entry of an observation: the window's start sample, or
// its end (the observed load, or why there is none).
type observeCmd struct {
	Start *LoadSample `json:"start,omitempty"`
	// End: the observed load per node (nodes missing from it have a note), or with
	// NotObserved set, why nothing was observed.
	Observed    map[string]float64 `json:"observed,omitempty"`
	Notes       map[string]string  `json:"notes,omitempty"`
	FromMs      int64              `json:"from_ms,omitempty"`
	ToMs        int64              `json:"to_ms,omitempty"`
	NotObserved string             `json:"not_observed,omitempty"`
}

func applyObserveLocked(st *fsmState, changeID uint64, oc *observeCmd) applyResult {
	r := st.History.record(changeID)
	switch {
	case oc == nil:
		return applyResult{err: fmt.Errorf("observe without a body: %w", ErrInvalidArgument)}
	case r == nil:
		return applyResult{err: fmt.Errorf("change %d: %w", changeID, ErrUnknownChange)}
	case r.Observation != ObservationObserving:
		return applyResult{err: fmt.Errorf("change %d is %s: %w", changeID, r.Observation, ErrInvalidArgument)}
	}
	switch {
	case oc.NotObserved != "":
		r.Observation, r.ObservationNote, r.Start = ObservationNotObserved, oc.NotObserved, nil
	case oc.Start != nil:
		if r.Start != nil {
			return applyResult{changeID: changeID} // a retried start: the first one holds
		}
		s := *oc.Start
		r.Start = &s
	default:
		if r.Start == nil {
			return applyResult{err: fmt.Errorf("change %d: an observation without its start sample: %w", changeID, ErrInvalidArgument)}
		}
		for i := range r.Nodes {
			n := &r.Nodes[i]
			if l, ok := oc.Observed[n.ID]; ok {
				n.Observed, n.HasObserved, n.Note = l, true, ""
			} else {
				n.Note = oc.Notes[n.ID]
			}
		}
		r.Observation, r.ObserveFromMs, r.ObserveToMs, r.Start = ObservationObserved, oc.FromMs, oc.ToMs, nil
	}
	return applyResult{changeID: changeID}
}

// History returns the finished changes this node knows, newest first: at most limit (0 =
// all), or with id only that one (ErrUnknownChange). ErrNoHistory when none has finished.
func (c *Cluster) History(limit int, id uint64) ([]ChangeRecord, error) {
	h := c.fsm.load().history
	if h == nil || len(h.Records) == 0 {
		return nil, ErrNoHistory
	}
	if id != 0 {
		r := h.record(id)
		if r == nil {
			return nil, fmt.Errorf("change %d: %w", id, ErrUnknownChange)
		}
		return []ChangeRecord{*r}, nil
	}
	out := slices.Clone(h.Records)
	slices.Reverse(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ObserveStart journals the start sample of change id's observation window. Leader only.
func (c *Cluster) ObserveStart(id uint64, s LoadSample) error {
	_, err := c.apply(command{Op: opObserve, ChangeID: id, Observe: &observeCmd{Start: &s}})
	return err
}

// Observed journals the end of change id's observation: the observed load per node over
// [fromMs, toMs] (a node without a figure has a note). Leader only.
func (c *Cluster) Observed(id uint64, fromMs, toMs int64, observed map[string]float64, notes map[string]string) error {
	_, err := c.apply(command{Op: opObserve, ChangeID: id, Observe: &observeCmd{Observed: observed, Notes: notes, FromMs: fromMs, ToMs: toMs}})
	if err == nil {
		c.logger.Info("ring change observed", "change", id, "load", observed)
	}
	return err
}

// NotObserved journals that change id's load will not be observed, and why. Leader only.
func (c *Cluster) NotObserved(id uint64, why string) error {
	_, err := c.apply(command{Op: opObserve, ChangeID: id, Observe: &observeCmd{NotObserved: why}})
	if err == nil {
		c.logger.Info("ring change not observed", "change", id, "why", why)
	}
	return err
}

// LoadSampler reads every member's replica load counter (LoadSample). Safe for concurrent
// use; it asks the members over the network and honours ctx.
type LoadSampler interface {
	SampleLoad(ctx context.Context, members []ring.Member) LoadSample
}

// observeOnce does the leader's part of observing the last finished change: the start sample
// once its window opens, the observed load once it closes. A window whose start the leader
// missed by more than its length (it was elected late) is not observed, and says so; one
// whose start was journaled by an earlier leader is finished by this one.
func (c *Cluster) observeOnce(ctx context.Context, s LoadSampler, now time.Time) error {
	if !c.IsLeader() {
		return nil
	}
	p := c.fsm.load()
	if p.history == nil || len(p.history.Records) == 0 || p.view == nil {
		return nil
	}
	r := p.history.Records[len(p.history.Records)-1]
	if r.Observation != ObservationObserving || p.change != nil {
		return nil // nothing to observe, or a change in flight moves the load (its commit ends this one)
	}
	nowMs := now.UnixMilli()
	window := r.ObserveToMs - r.ObserveFromMs
	if r.Start == nil {
		if nowMs < r.ObserveFromMs {
			return nil
		}
		if nowMs > r.ObserveFromMs+window {
			return c.NotObserved(r.ID, "leader changed: no leader sampled the window's start")
		}
		sample := s.SampleLoad(ctx, p.view.Current.Members())
		return c.ObserveStart(r.ID, sample)
	}
	if nowMs < r.Start.UnixMs+window {
		return nil
	}
	end := s.SampleLoad(ctx, p.view.Current.Members())
	if end.Epoch != r.Start.Epoch {
		return c.NotObserved(r.ID, fmt.Sprintf("the ring changed during the window (epoch %d to %d)", r.Start.Epoch, end.Epoch))
	}
	sec := float64(end.UnixMs-r.Start.UnixMs) / 1000
	if sec <= 0 {
		return nil
	}
	observed, notes := map[string]float64{}, map[string]string{}
	for _, n := range r.Nodes {
		t0, ok0 := r.Start.Totals[n.ID]
		t1, ok1 := end.Totals[n.ID]
		switch {
		case !ok0 && !ok1 && n.Predicted == 0:
			observed[n.ID] = 0 // left the ring, as predicted
		case !ok0:
			notes[n.ID] = "did not answer at the window's start: " + r.Start.Missing[n.ID]
		case !ok1:
			notes[n.ID] = "did not answer at the window's end: " + end.Missing[n.ID]
		case t1 < t0:
			notes[n.ID] = "restarted during the window"
		default:
			observed[n.ID] = float64(t1-t0) / sec
		}
	}
	return c.Observed(r.ID, r.Start.UnixMs, end.UnixMs, observed, notes)
}

// Observe runs the leader's observation of finished changes every ReconcileInterval until ctx
// ends; every member runs it, and whichever leads does the work.
func (c *Cluster) Observe(ctx context.Context, s LoadSampler) {
	t := time.NewTicker(c.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if err := c.observeOnce(ctx, s, now); err != nil && ctx.Err() == nil {
				c.logger.Warn("observe ring change load", "err", err)
			}
		}
	}
}

func (p *Prediction) clone() *Prediction {
	if p == nil {
		return nil
	}
	cp := *p
	cp.Nodes = slices.Clone(p.Nodes)
	return &cp
}
