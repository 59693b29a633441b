package repair

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	"ringkv/node/peers"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// Plan computes what a repair would compare, with estimates, warnings and refusals.
func (s *Service) Plan(ctx context.Context, req *kvpb.RepairRequest) (*kvpb.RepairPlan, error) {
	p, _, err := s.plan(ctx, req, false)
	return p, err
}

// planned is what a session needs of each plan range beside the plan: its replicas, and
// the most records one of them holds (the trees' depth).
type planned struct {
	members []ring.Member
	keys    uint64
}

func rangesOf(members [][]ring.Member, most []uint64) []planned {
	out := make([]planned, len(members))
	for i := range members {
		out[i] = planned{members: members[i], keys: most[i]}
	}
	return out
}

func (s *Service) plan(ctx context.Context, req *kvpb.RepairRequest, primaryOnly bool) (*kvpb.RepairPlan, []planned, error) {
	plan := &kvpb.RepairPlan{Request: proto.Clone(req).(*kvpb.RepairRequest)}
	if plan.Request.RateBytes == 0 {
		plan.Request.RateBytes = s.cfg.DefaultRate
	}
	v := s.cfg.View()
	if v == nil || v.Current == nil {
		plan.Refusals = append(plan.Refusals, "this node is not in a ring yet")
		return plan, nil, nil
	}
	cur := v.Current
	plan.Epoch = cur.Epoch()
	if v.Changing() {
		plan.Refusals = append(plan.Refusals, fmt.Sprintf("ring change %d is in flight: repair once it commits or aborts", v.Change))
	}
	if id := req.GetNodeId(); id != "" {
		if _, ok := cur.Member(id); !ok {
			return nil, nil, fmt.Errorf("%w: node %q is not in the ring", ErrInvalidArgument, id)
		}
	}
	ranges := cur.Ranges()
	want := map[uint64]bool{}
	for _, t := range req.GetVnodes() {
		if !slices.ContainsFunc(ranges, func(r ring.Range) bool { return r.End == t }) {
			return nil, nil, fmt.Errorf("%w: no vnode with token %016x in the ring", ErrInvalidArgument, t)
		}
		want[t] = true
	}
	var members [][]ring.Member
	pairs := map[string]bool{}
	single := 0
	for _, r := range ranges {
		if len(want) > 0 && !want[r.End] {
			continue
		}
		reps := cur.Lookup(r.End, cur.Replicas())
		if id := req.GetNodeId(); id != "" && !slices.ContainsFunc(reps, func(m ring.Member) bool { return m.ID == id }) {
			continue
		}
		if primaryOnly && reps[0].ID != s.cfg.Self {
			continue
		}
		if len(reps) < 2 {
			single++
			continue
		}
		rr := &kvpb.RepairRange{Start: r.Start, End: r.End}
		for _, m := range reps {
			rr.Replicas = append(rr.Replicas, m.ID)
		}
		for i := range reps {
			for j := i + 1; j < len(reps); j++ {
				pairs[pairName(reps[i].ID, reps[j].ID)] = true
			}
		}
		plan.Ranges = append(plan.Ranges, rr)
		members = append(members, reps)
	}
	if single > 0 {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("%d ranges have a single replica: nothing to compare", single))
	}
	for p := range pairs {
		plan.Pairs = append(plan.Pairs, p)
	}
	sort.Strings(plan.Pairs)
	most := s.estimate(ctx, cur, plan, members)
	return plan, rangesOf(members, most), nil
}

// pairName is how a replica pair is named in plans and results: "a/b" with a < b.
func pairName(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return a + "/" + b
}

// estimate asks every member involved for the record counts of the ranges it holds
// (Admin.CountRanges, keys only): the primary's count is the plan's estimate, the largest
// replica's sizes the range's trees (a replica that missed everything must not make the
// trees coarse). A member that does not answer refuses the plan: its ranges could not be
// repaired. It returns the largest count per range.
func (s *Service) estimate(ctx context.Context, cur *ring.Ring, plan *kvpb.RepairPlan, members [][]ring.Member) []uint64 {
	byNode := map[string][]int{}
	for i, reps := range members {
		for _, m := range reps {
			byNode[m.ID] = append(byNode[m.ID], i)
		}
	}
	ids := make([]string, 0, len(byNode))
	for id := range byNode {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	asks := make([]peers.Count, len(ids))
	for k, id := range ids {
		asks[k].Member, _ = cur.Member(id)
		for _, i := range byNode[id] {
			asks[k].Ranges = append(asks[k].Ranges, &kvpb.TokenRange{Start: plan.Ranges[i].Start, End: plan.Ranges[i].End})
		}
	}
	// Every member is asked over its Admin service, this node's own included.
	counts, errs := peers.CountRanges(ctx, peers.Peers{Self: s.cfg.Self, Dial: s.cfg.Dial}, asks, nil)
	most := make([]uint64, len(members))
	for k, id := range ids {
		if errs[k] != nil {
			plan.Refusals = append(plan.Refusals, fmt.Sprintf("replica %s does not answer: %s", id, peers.ErrorLine(errs[k])))
			continue
		}
		for j, i := range byNode[id] {
			c := counts[k][j]
			most[i] = max(most[i], c.GetKeys())
			if members[i][0].ID != id {
				continue
			}
			rr := plan.Ranges[i]
			rr.EstKeys, rr.EstBytes = c.GetKeys(), c.GetBytes()
			plan.EstKeys += rr.EstKeys
			plan.EstBytes += rr.EstBytes
		}
	}
	return most
}
