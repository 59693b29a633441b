package present

import (
	"fmt"

	"ringkv/proto/kvpb"
)

// WhatHappens says in one sentence what a change does to the cluster, for the console's
// confirmation.
func WhatHappens(r *kvpb.ChangeRequest) string {
	switch r.GetKind() {
	case kvpb.ChangeRequest_ADD:
		return fmt.Sprintf("Node %s at %s joins the ring and streams its new ranges in.", r.GetNodeId(), r.GetGrpcAddr())
	case kvpb.ChangeRequest_REMOVE:
		return fmt.Sprintf("Node %s streams its ranges to the new owners, then leaves the ring.", r.GetNodeId())
	case kvpb.ChangeRequest_REBALANCE:
		return "Vnodes move away from hot nodes by measured load."
	}
	return ""
}

// PlanLines is a dry-run plan as the console shows it: the epochs, moves and estimated
// keys and bytes, each node's share and vnodes before → after (and load for a rebalance),
// then the plan's warnings and refusals.
func PlanLines(p *kvpb.ChangePlan) []string {
	lines := []string{fmt.Sprintf("epoch %d → %d, %d range moves, ~%s keys, ~%s",
		p.GetFromEpoch(), p.GetToEpoch(), len(p.GetMoves()),
		Count(float64(p.GetEstKeys())), BytesShort(float64(p.GetEstBytes())))}
	after := map[string]*kvpb.NodeOwnership{}
	for _, o := range p.GetAfter() {
		after[o.GetId()] = o
	}
	rebalance := p.GetRequest().GetKind() == kvpb.ChangeRequest_REBALANCE
	for _, b := range p.GetBefore() {
		a := after[b.GetId()]
		line := fmt.Sprintf("  %-10s share %5.1f%% → %5.1f%%  vnodes %d → %d",
			b.GetId(), b.GetShare()*100, a.GetShare()*100, b.GetVnodes(), a.GetVnodes())
		if rebalance {
			line += fmt.Sprintf("  load %.0f → %.0f op/s", b.GetLoad(), a.GetLoad())
		}
		lines = append(lines, line)
	}
	for _, o := range p.GetAfter() {
		found := false
		for _, b := range p.GetBefore() {
			found = found || b.GetId() == o.GetId()
		}
		if !found {
			lines = append(lines, fmt.Sprintf("  %-10s share   new → %5.1f%%  vnodes 0 → %d", o.GetId(), o.GetShare()*100, o.GetVnodes()))
		}
	}
	for _, w := range p.GetWarnings() {
		lines = append(lines, "warning: "+w)
	}
	for _, r := range p.GetRefusals() {
		lines = append(lines, "refused: "+r)
	}
	return lines
}

// Count formats a count compactly: 950, 1.2k, 34k, 3.4M, 1.2G.
func Count(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.1fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
