package change

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"ringkv/node/cluster"
	"ringkv/node/peers"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

var _ cluster.LoadSampler = (*Service)(nil)

// prediction is the load record a change journals when it begins: each node's replica load
// measured now (the rebalance planner's input, over the last minute) and predicted once the
// change is done (ring.PredictChange: each vnode's load moves with its token range), with
// the observation window after the commit. nil when no load was measured.
func (s *Service) prediction(measured, predicted map[string]float64, estBytes uint64) *cluster.Prediction {
	total := 0.0
	for _, l := range measured {
		total += l
	}
	if total == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(measured))
	for id := range predicted {
		if _, ok := measured[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	p := &cluster.Prediction{
		DelayMs: s.cfg.PredictionDelay.Milliseconds(), WindowMs: s.cfg.PredictionWindow.Milliseconds(),
		EstBytes: estBytes,
	}
	for _, id := range ids {
		p.Nodes = append(p.Nodes, cluster.NodeLoad{ID: id, Before: measured[id], Predicted: predicted[id]})
	}
	return p
}

// predictLoads measures the load per range of cur and predicts each node's load in next.
func (s *Service) predictLoads(ctx context.Context, cur, next *ring.Ring) (measured, predicted map[string]float64) {
	var ignored []string
	load := s.rangeLoads(ctx, cur, &ignored)
	return ring.PredictChange(cur, cur, load), ring.PredictChange(cur, next, load)
}

// SampleLoad reads every member's replica load counter: the sum of its vnodes' read and
// write totals. A member that does not answer is listed in Missing.
func (s *Service) SampleLoad(ctx context.Context, members []ring.Member) cluster.LoadSample {
	stats, errs := s.vnodeStats(ctx, members)
	out := cluster.LoadSample{UnixMs: time.Now().UnixMilli(), Totals: map[string]uint64{}}
	for i, m := range members {
		if errs[i] != nil {
			if out.Missing == nil {
				out.Missing = map[string]string{}
			}
			out.Missing[m.ID] = peers.ErrorLine(errs[i])
			continue
		}
		var sum uint64
		for _, v := range stats[i].GetVnodes() {
			sum += v.GetReadsTotal() + v.GetWritesTotal()
		}
		out.Totals[m.ID] = sum
		out.Epoch = max(out.Epoch, stats[i].GetEpoch())
	}
	return out
}

// History returns the last finished changes, newest first, with their load before, predicted
// and observed per node: at most limit (0 = all kept), or with id only that change.
// cluster.ErrNoHistory when none has finished, cluster.ErrUnknownChange for an id not kept.
func (s *Service) History(limit int, id uint64) ([]*kvpb.ChangeRecord, error) {
	if limit < 0 {
		return nil, fmt.Errorf("%w: limit %d: want at least 1 change (0 = all)", cluster.ErrInvalidArgument, limit)
	}
	recs, err := s.cfg.Cluster.History(limit, id)
	if err != nil {
		return nil, err
	}
	out := make([]*kvpb.ChangeRecord, 0, len(recs))
	for _, r := range recs {
		out = append(out, recordProto(r))
	}
	return out, nil
}

func recordProto(r cluster.ChangeRecord) *kvpb.ChangeRecord {
	out := &kvpb.ChangeRecord{
		Id: r.ID, Kind: kindProto(r.Kind), NodeId: r.NodeID, By: r.By,
		StartedUnixMs: r.StartedUnixMs, FinishedUnixMs: r.FinishedUnixMs, EstBytes: r.EstBytes,
		VnodesMoved: uint32(r.Vnodes), RangesMoved: uint32(r.Ranges),
		ObservationNote: r.ObservationNote, ObserveFromUnixMs: r.ObserveFromMs, ObserveToUnixMs: r.ObserveToMs,
	}
	switch r.Outcome {
	case cluster.OutcomeCommitted:
		out.Outcome = kvpb.ChangeOutcome_CHANGE_OUTCOME_DONE
	case cluster.OutcomeAborted:
		out.Outcome = kvpb.ChangeOutcome_CHANGE_OUTCOME_ABORTED
	}
	switch r.Observation {
	case cluster.ObservationObserving:
		out.Observation = kvpb.Observation_OBSERVATION_OBSERVING
	case cluster.ObservationObserved:
		out.Observation = kvpb.Observation_OBSERVATION_OBSERVED
	case cluster.ObservationNotObserved:
		out.Observation = kvpb.Observation_OBSERVATION_NOT_OBSERVED
	}
	for _, n := range r.Nodes {
		np := &kvpb.NodeLoadPrediction{Id: n.ID, Before: n.Before, Predicted: n.Predicted, Observed: n.Observed, ObservedOk: n.HasObserved, Note: n.Note}
		if n.HasObserved {
			np.Error, np.Off, np.ErrorOk = ring.PredictionError(n.Predicted, n.Observed)
		}
		out.Nodes = append(out.Nodes, np)
	}
	return out
}

func kindProto(k string) kvpb.ChangeRequest_Kind {
	switch k {
	case cluster.KindAdd:
		return kvpb.ChangeRequest_ADD
	case cluster.KindRemove:
		return kvpb.ChangeRequest_REMOVE
	case cluster.KindRebalance:
		return kvpb.ChangeRequest_REBALANCE
	}
	return kvpb.ChangeRequest_KIND_UNSPECIFIED
}
