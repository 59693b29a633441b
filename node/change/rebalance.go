package change

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"ringkv/node/peers"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// defaultRebalanceMoves is how many vnodes a rebalance moves at most when the request does not say.
const defaultRebalanceMoves = 8

// rangeLoads asks every member of cur for its per-vnode stats: per range of cur (by end token)
// and member, the replica reads and writes per second over the last minute it served. A member
// that does not answer adds a warning and no load.
func (s *Service) rangeLoads(ctx context.Context, cur *ring.Ring, warnings *[]string) ring.RangeLoad {
	ms := cur.Members()
	stats, errs := s.vnodeStats(ctx, ms)
	load := ring.RangeLoad{}
	for i, m := range ms {
		if errs[i] != nil {
			*warnings = append(*warnings, fmt.Sprintf("no load from %s: %s; it counts as idle", m.ID, peers.ErrorLine(errs[i])))
			continue
		}
		if e := stats[i].GetEpoch(); e != cur.Epoch() {
			*warnings = append(*warnings, fmt.Sprintf("%s reports load for epoch %d, not %d", m.ID, e, cur.Epoch()))
		}
		for _, v := range stats[i].GetVnodes() {
			l := v.GetReads_1M() + v.GetWrites_1M()
			if l == 0 {
				continue
			}
			if load[v.GetToken()] == nil {
				load[v.GetToken()] = map[string]float64{}
			}
			load[v.GetToken()][m.ID] += l
		}
	}
	return load
}

// whyNoRebalance says exactly why a rebalance finds nothing to move in cur with the measured
// replica load per node: no load; every node holds every key (N >= nodes), so no move
// changes any load; the most loaded node within the tolerance; or no move of its vnodes
// lowers it enough.
func whyNoRebalance(cur *ring.Ring, measured map[string]float64, cfg ring.RebalanceConfig) string {
	ms := cur.Members()
	total, hot, top := 0.0, "", -1.0
	for _, m := range ms {
		l := measured[m.ID]
		total += l
		if l > top {
			hot, top = m.ID, l
		}
	}
	if total == 0 {
		return "no load measured over the last minute: nothing to rebalance"
	}
	if cur.Replicas() >= len(ms) {
		return fmt.Sprintf("with %d replicas on %d nodes every node holds every key, so no vnode move changes any node's load: nothing to rebalance (add nodes to spread it)",
			cur.Replicas(), len(ms))
	}
	mean := total / float64(len(ms))
	above := 100 * (top/mean - 1)
	if top <= mean*(1+cfg.Tolerance) {
		return fmt.Sprintf("the most loaded node, %s, is %.0f%% above the mean of %.0f replica ops/s, within the %.0f%% tolerance: nothing to rebalance",
			hot, above, mean, 100*cfg.Tolerance)
	}
	return fmt.Sprintf("%s is %.0f%% above the mean of %.0f replica ops/s, but no move of one of its vnodes lowers the most loaded node's load by %.0f%% or more (its load sits on few vnodes, or on ranges every candidate also replicates): nothing to rebalance",
		hot, above, mean, 100*cfg.MinGain)
}

// planRebalance fills in the vnodes a rebalance request moves, chosen by ring.PlanRebalance
// from the measured load, unless the request names them. It returns the completed request,
// the measured load per node and the modelled load per node after the moves (nil maps when
// the request named its moves), or a nil request when nothing is worth moving (with the
// reason in warnings).
func (s *Service) planRebalance(ctx context.Context, cur *ring.Ring, req *kvpb.ChangeRequest, warnings *[]string) (*kvpb.ChangeRequest, map[string]float64, map[string]float64, error) {
	if len(req.GetTokenMoves()) > 0 {
		return req, nil, nil, nil
	}
	maxMoves := int(req.GetMaxMoves())
	if maxMoves == 0 {
		maxMoves = defaultRebalanceMoves
	}
	load := s.rangeLoads(ctx, cur, warnings)
	measured := ring.PredictLoad(cur, cur, load)
	cfg := ring.DefaultRebalanceConfig()
	cfg.MaxMoves = maxMoves
	moves, next, err := ring.PlanRebalance(cur, load, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(moves) == 0 {
		*warnings = append(*warnings, whyNoRebalance(cur, measured, cfg))
		return nil, measured, nil, nil
	}
	predicted := ring.PredictLoad(cur, next, load)
	out := proto.Clone(req).(*kvpb.ChangeRequest)
	for _, mv := range moves {
		vl := 0.0
		for _, l := range load[mv.Token] {
			vl += l
		}
		out.TokenMoves = append(out.TokenMoves, &kvpb.TokenMove{Token: mv.Token, From: mv.From, To: mv.To, Load: vl})
	}
	return out, measured, predicted, nil
}

// vnodeStats asks every member (this node by its own Stats) for its stats with the per-vnode
// counters, as rangeLoads and SampleLoad read them.
func (s *Service) vnodeStats(ctx context.Context, members []ring.Member) ([]*kvpb.NodeStats, []error) {
	return peers.Ask(ctx, s.cfg.Peers, members,
		func() (*kvpb.NodeStats, bool) {
			if s.cfg.Stats == nil {
				return nil, false
			}
			return s.cfg.Stats.Snapshot(true), true
		},
		func(ctx context.Context, c kvpb.AdminClient) (*kvpb.NodeStats, error) {
			return c.Stats(ctx, &kvpb.StatsRequest{Vnodes: true})
		})
}
