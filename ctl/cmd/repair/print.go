package repair

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// listMax is the most ranges listed one by one without --ranges.
const listMax = 12

// PrintPlan renders a repair plan: what it covers, the ranges (each, or summarised per
// replica set), the replica pairs compared, the estimates, warnings and refusals.
func PrintPlan(ios *cli.IOStreams, p *kvpb.RepairPlan, allRanges bool) error {
	w := ios.Out
	fmt.Fprintf(w, "plan: repair %s, ring epoch %d\n", present.Repair(p.GetRequest()), p.GetEpoch())
	fmt.Fprintf(w, "ranges: %d, est. %d keys, %s (each range's primary replica counts them)\n",
		len(p.GetRanges()), p.GetEstKeys(), present.Bytes(p.GetEstBytes()))
	if n := len(p.GetRanges()); n > 0 && (allRanges || n <= listMax) {
		t := cli.NewTable(ios, "  RANGE", "REPLICAS", "EST-KEYS", "EST-BYTES")
		for _, r := range p.GetRanges() {
			t.Row("  "+present.TokenRange(r.GetStart(), r.GetEnd()), strings.Join(r.GetReplicas(), ","), r.GetEstKeys(), present.Bytes(r.GetEstBytes()))
		}
		if err := t.Render(); err != nil {
			return err
		}
	} else if n > 0 {
		type agg struct {
			n           int
			keys, bytes uint64
		}
		by := map[string]*agg{}
		var order []string
		for _, r := range p.GetRanges() {
			k := strings.Join(r.GetReplicas(), ",")
			a := by[k]
			if a == nil {
				a = &agg{}
				by[k] = a
				order = append(order, k)
			}
			a.n++
			a.keys += r.GetEstKeys()
			a.bytes += r.GetEstBytes()
		}
		sort.Strings(order)
		t := cli.NewTable(ios, "  REPLICAS", "RANGES", "EST-KEYS", "EST-BYTES")
		for _, k := range order {
			a := by[k]
			t.Row("  "+k, a.n, a.keys, present.Bytes(a.bytes))
		}
		if err := t.Render(); err != nil {
			return err
		}
		fmt.Fprintln(w, "  (--ranges lists every range)")
	}
	if pairs := p.GetPairs(); len(pairs) > 0 {
		fmt.Fprintf(w, "replica pairs compared: %d (%s)\n", len(pairs), strings.Join(pairs, ", "))
	}
	if r := p.GetRequest().GetRateBytes(); r > 0 {
		fmt.Fprintf(w, "streaming throttle: %s per receiving node\n", present.Rate(float64(r)))
	}
	for _, s := range p.GetWarnings() {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	for _, s := range p.GetRefusals() {
		fmt.Fprintf(w, "refused: %s\n", s)
	}
	return nil
}

// PrintResult renders a finished (or running) session's result: its outcome in one line,
// the table per replica pair, then the ranges that failed and, on a dry run (or with
// allRanges), the ranges whose replicas differ.
func PrintResult(ios *cli.IOStreams, p *kvpb.RepairProgress, allRanges bool) error {
	w := ios.Out
	fmt.Fprintln(w, present.RepairOutcome(p))
	if err := pairTable(ios, p.GetPairs()); err != nil {
		return err
	}
	var failed, differ []*kvpb.RangeRepair
	for _, r := range p.GetRanges() {
		if r.GetState() == kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED || r.GetError() != "" {
			failed = append(failed, r)
		}
		for _, pr := range r.GetPairs() {
			if pr.GetLeavesMismatched() > 0 {
				differ = append(differ, r)
				break
			}
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "ranges that failed: %d\n", len(failed))
		if err := rangeTable(ios, failed, allRanges); err != nil {
			return err
		}
	}
	if (p.GetPlan().GetRequest().GetDryRun() || allRanges) && len(differ) > 0 {
		fmt.Fprintf(w, "ranges whose replicas differ: %d\n", len(differ))
		if err := rangeTable(ios, differ, allRanges); err != nil {
			return err
		}
	}
	return nil
}

// rangeTable lists ranges of a session: replicas, state, leaves mismatched, keys repaired.
func rangeTable(ios *cli.IOStreams, rs []*kvpb.RangeRepair, all bool) error {
	t := cli.NewTable(ios, "  RANGE", "REPLICAS", "STATE", "MISMATCHED", "KEYS", "ERROR")
	for i, r := range rs {
		if i == listMax && !all {
			if err := t.Render(); err != nil {
				return err
			}
			_, err := fmt.Fprintf(ios.Out, "  … %d more (--ranges lists them all; -o json has them)\n", len(rs)-listMax)
			return err
		}
		var mism, keys uint64
		for _, pr := range r.GetPairs() {
			mism += pr.GetLeavesMismatched()
			keys += pr.GetKeysToA() + pr.GetKeysToB()
		}
		rg := r.GetRange()
		t.Row("  "+present.TokenRange(rg.GetStart(), rg.GetEnd()), strings.Join(rg.GetReplicas(), ","),
			present.RangeRepair(r.GetState()), mism, keys, r.GetError())
	}
	return t.Render()
}

// printOutcome prints a finished session on stdout and returns the error its state means:
// nil when done, else one that exits 1.
func printOutcome(d Deps, p *kvpb.RepairProgress, allRanges bool) error {
	var err error
	if d.JSON() {
		err = cli.PrintJSON(d.IO.Out, p)
	} else {
		err = PrintResult(d.IO, p, allRanges)
	}
	if err != nil {
		return err
	}
	switch p.GetState() {
	case kvpb.RepairState_REPAIR_STATE_DONE:
		return nil
	case kvpb.RepairState_REPAIR_STATE_ABORTED:
		msg := fmt.Sprintf("repair %d was aborted", p.GetId())
		if e := p.GetError(); e != "" {
			msg += ": " + e
		}
		return fmt.Errorf("%s; what it streamed stays; run kvctl repair again to finish", msg)
	}
	return fmt.Errorf("repair %d %s: %s", p.GetId(), present.RepairState(p.GetState()), firstNonEmpty(p.GetError(), "see the ranges that failed"))
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// PrintProgress renders a snapshot of a session (kvctl repair status): its line, times and
// throttle, then per node and per replica pair, and with allRanges every range.
func PrintProgress(ios *cli.IOStreams, p *kvpb.RepairProgress, allRanges bool) error {
	w := ios.Out
	if p.GetId() == 0 || p.GetState() == kvpb.RepairState_REPAIR_STATE_NONE {
		fmt.Fprintln(w, "no repair has run on this node")
		if l := present.RepairPaused(p, time.Now()); l != "" {
			fmt.Fprintln(w, "repair "+l)
		}
		return nil
	}
	if p.GetState().InFlight() {
		fmt.Fprintln(w, present.RepairLine(p))
	} else {
		fmt.Fprintln(w, present.RepairOutcome(p))
	}
	if l := present.RepairPaused(p, time.Now()); l != "" {
		fmt.Fprintln(w, l)
	}
	if l := present.RepairContinued(p); l != "" {
		fmt.Fprintln(w, l)
	}
	if p.GetJournaled() {
		fmt.Fprintf(w, "as journaled in raft (its coordinator %s does not answer; another node takes it over if it stays down)\n", p.GetCoordinator())
	}
	if s := p.GetStartedUnix(); s > 0 {
		fmt.Fprintf(w, "started %s", time.Unix(s, 0).Format(time.DateTime))
		if f := p.GetFinishedUnix(); f > 0 {
			fmt.Fprintf(w, ", finished %s", time.Unix(f, 0).Format(time.DateTime))
		}
		fmt.Fprintf(w, ", throttle %s\n", limit(p.GetRateLimitBytes()))
	}
	if nodes := perNode(p); len(nodes) > 0 {
		t := cli.NewTable(ios, "NODE", "RANGES", "KEYS-IN", "NOTE")
		for _, n := range nodes {
			note := ""
			if n.Failed > 0 {
				note = fmt.Sprintf("%d failed: %s", n.Failed, n.LastErr)
			}
			t.Row(n.ID, fmt.Sprintf("%d/%d", n.RangesDone, n.Ranges), n.KeysIn, note)
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	if err := pairTable(ios, p.GetPairs()); err != nil {
		return err
	}
	if allRanges && len(p.GetRanges()) > 0 {
		return rangeTable(ios, p.GetRanges(), true)
	}
	return nil
}

func limit(b uint64) string {
	if b == 0 {
		return "the nodes' default"
	}
	return present.Rate(float64(b)) + " per receiving node"
}

// pairTable renders the table per replica pair (nothing without pairs).
func pairTable(ios *cli.IOStreams, pairs []*kvpb.PairRepair) error {
	if len(pairs) == 0 {
		return nil
	}
	t := cli.NewTable(ios, present.RepairPairHeader()...)
	for _, pr := range pairs {
		cells := present.RepairPairRow(pr)
		row := make([]any, len(cells))
		for i, c := range cells {
			row[i] = c
		}
		t.Row(row...)
	}
	return t.Render()
}
