package present

import (
	"slices"
	"strings"

	"ringkv/proto/kvpb"
)

// DiskFull is how kvctl and the console name a node whose data volume is below its reserve.
const DiskFull = "DISK FULL"

// DiskFullShort is DiskFull in the console's 7-wide state column.
const DiskFullShort = "FULL"

// DataDamaged is how kvctl and the console name a node that started with --recover on
// damaged data.
const DataDamaged = "DATA DAMAGED"

// Faults is the note of a node's faults in kvctl status: "DISK FULL: 3.9 MiB free of 16.0
// MiB, reserve 4.0 MiB (--min-free-disk)", "DATA DAMAGED: 12 ranges damaged, awaiting repair
// (…)", or both; "" when it has none.
func Faults(info *kvpb.NodeInfoResponse) string {
	var s string
	if r := info.GetDiskFull(); r != "" {
		s = DiskFull + ": " + strings.TrimPrefix(r, "disk full: ")
	}
	d, n := info.GetDataDamage(), info.GetDamagedRanges()
	if d == "" && n == 0 {
		return s
	}
	if s != "" {
		s += "; "
	}
	s += DataDamaged
	if n > 0 {
		s += ": " + kvpb.DamagedRanges(int(n))
	}
	if d != "" {
		s += " (" + d + ")"
	}
	return s
}

// DiskFullEvent is the console's event line when a node's disk fills up (reason is its
// NodeInfo.disk_full: "disk full: 3.9 MiB free of 16.0 MiB, reserve 4.0 MiB (--min-free-disk)")
// or has room again (reason "").
func DiskFullEvent(id, reason string) string {
	if reason != "" {
		return "node " + id + " " + DiskFull + ": " + strings.TrimPrefix(reason, "disk full: ") + "; writes refused"
	}
	return "node " + id + " has disk space again: writes resume"
}

// Gray merges the gray nodes the answering nodes name (NodeInfo.gray), one per node, in the
// order an operator counts nodes. A node that answered speaks for itself: its verdict on
// itself (or none) is the one its /readyz gives (NodeInfo.problems), and it decides whether
// and why it is named, so that kvctl, the console and a balancer's health check say one
// thing. Of a node that did not answer (down, cut off from the node asked), the others'
// verdicts are all there is: where they disagree on what is wrong, the one named most often
// wins, then the first.
func Gray(nodes []*kvpb.NodeStatus) []*kvpb.GrayNode {
	type tally struct {
		g *kvpb.GrayNode
		n int
	}
	answered := map[string]bool{}
	for _, n := range nodes {
		if n.GetError() == "" && n.GetInfo() != nil {
			answered[n.GetId()] = true
		}
	}
	votes := map[string]map[kvpb.GrayNode_Kind]*tally{}
	for _, n := range nodes {
		for _, g := range n.GetInfo().GetGray() {
			if answered[g.GetNode()] && g.GetNode() != n.GetId() {
				continue // it speaks for itself
			}
			byKind := votes[g.GetNode()]
			if byKind == nil {
				byKind = map[kvpb.GrayNode_Kind]*tally{}
				votes[g.GetNode()] = byKind
			}
			if t := byKind[g.GetKind()]; t != nil {
				t.n++
			} else {
				byKind[g.GetKind()] = &tally{g: g, n: 1}
			}
		}
	}
	var out []*kvpb.GrayNode
	for _, byKind := range votes {
		var best *tally
		for _, t := range byKind {
			if best == nil || t.n > best.n || (t.n == best.n && t.g.GetKind() < best.g.GetKind()) {
				best = t
			}
		}
		out = append(out, best.g)
	}
	slices.SortFunc(out, func(a, b *kvpb.GrayNode) int { return CompareIDs(a.GetNode(), b.GetNode()) })
	return out
}

// GrayShort names a gray node in the console's 7-wide state column.
const GrayShort = "GRAY"

// GrayEvent is the console's event line when a node turns gray (line is its kvpb.GrayLine)
// or is no longer (line "").
func GrayEvent(id, line string) string {
	if line != "" {
		return line
	}
	return "node " + id + " is no longer gray"
}
