package present

import (
	"fmt"
	"slices"
	"strings"
	"time"

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

// Restart is a node that its peers saw go away and come back within the last minute, and
// is not named gray: a restart (or a comeback once a cut healed), which alone keeps it
// ready, but which, done again, is flapping.
type Restart struct {
	Node string
	// Ago is how long ago it came back, Away how long it had been away; Restarted whether it
	// answered with an uptime that short (a process restart, not a healed cut).
	Ago, Away time.Duration
	Restarted bool
}

// Line is kvctl status's note: "note: n3 restarted 5s ago after 5s away (flapping if it goes
// again within a minute)".
func (r Restart) Line() string {
	what := "came back"
	if r.Restarted {
		what = "restarted"
	}
	return fmt.Sprintf("note: %s %s %s ago after %s away (flapping if it goes again within a minute)",
		r.Node, what, r.Ago.Round(time.Second), r.Away.Round(100*time.Millisecond))
}

// Restarts are the nodes the answering nodes saw come back within the last minute
// (NodeInfo.links: back_ago_millis), by the latest comeback seen, but those gray names (a
// flapping node is named so) and those that do not answer now (they are away again). In
// the order an operator counts nodes.
func Restarts(nodes []*kvpb.NodeStatus, gray []*kvpb.GrayNode) []Restart {
	named := map[string]bool{}
	for _, g := range gray {
		named[g.GetNode()] = true
	}
	up := map[string]*kvpb.NodeInfoResponse{}
	for _, n := range nodes {
		if n.GetError() == "" && n.GetInfo() != nil {
			up[n.GetId()] = n.GetInfo()
		}
	}
	seen := map[string]Restart{}
	for _, n := range nodes {
		for _, l := range n.GetInfo().GetLinks() {
			p := l.GetPeer()
			if p == n.GetId() || l.GetBackAgoMillis() == 0 || named[p] || up[p] == nil {
				continue
			}
			r := Restart{Node: p, Ago: time.Duration(l.GetBackAgoMillis()) * time.Millisecond,
				Away: time.Duration(l.GetAwayMillis()) * time.Millisecond}
			if old, ok := seen[p]; ok && old.Ago <= r.Ago {
				continue
			}
			// Up no longer than since it came back (and the seconds the peers took to see it).
			r.Restarted = time.Duration(up[p].GetUptimeSeconds())*time.Second <= r.Ago+5*time.Second
			seen[p] = r
		}
	}
	var out []Restart
	for _, r := range seen {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Restart) int { return CompareIDs(a.Node, b.Node) })
	return out
}
