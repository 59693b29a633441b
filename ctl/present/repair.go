package present

import (
	"fmt"
	"math"
	"time"

	"ringkv/proto/kvpb"
)

// repairWords and rangeRepairWords are the words every surface shows for a repair session's
// state and a range's state within it.
var (
	repairWords = map[kvpb.RepairState]string{
		kvpb.RepairState_REPAIR_STATE_NONE:    "none",
		kvpb.RepairState_REPAIR_STATE_RUNNING: "running",
		kvpb.RepairState_REPAIR_STATE_DONE:    "done",
		kvpb.RepairState_REPAIR_STATE_FAILED:  "failed",
		kvpb.RepairState_REPAIR_STATE_ABORTED: "aborted",
	}
	rangeRepairWords = map[kvpb.RangeRepairState]string{
		kvpb.RangeRepairState_RANGE_REPAIR_STATE_PENDING:   "pending",
		kvpb.RangeRepairState_RANGE_REPAIR_STATE_COMPARING: "comparing",
		kvpb.RangeRepairState_RANGE_REPAIR_STATE_STREAMING: "streaming",
		kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE:      "done",
		kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED:    "failed",
	}
)

// RepairState renders a repair session's state: "none", "running", "done", "failed",
// "aborted".
func RepairState(s kvpb.RepairState) string {
	if w, ok := repairWords[s]; ok {
		return w
	}
	return s.String()
}

// RangeRepair renders the state of one range of a repair: "pending", "comparing",
// "streaming", "done", "failed".
func RangeRepair(s kvpb.RangeRepairState) string {
	if w, ok := rangeRepairWords[s]; ok {
		return w
	}
	return s.String()
}

// Repair names what a repair covers: "every range", "n2's ranges", "2 vnodes",
// "1 vnode of n2", with " (dry run)" when it streams nothing.
func Repair(r *kvpb.RepairRequest) string {
	var s string
	switch n := len(r.GetVnodes()); {
	case n > 0 && r.GetNodeId() != "":
		s = fmt.Sprintf("%d vnode%s of %s", n, plural(n), r.GetNodeId())
	case n > 0:
		s = fmt.Sprintf("%d vnode%s", n, plural(n))
	case r.GetNodeId() != "":
		s = r.GetNodeId() + "'s ranges"
	default:
		s = "every range"
	}
	if r.GetDryRun() {
		s += " (dry run)"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// RepairInFlight tells whether p is a repair session that is running.
func RepairInFlight(p *kvpb.RepairProgress) bool {
	return p.GetId() != 0 && p.GetState().InFlight()
}

// RepairPhase is what a running session does now: "paused" while repair is paused,
// "streaming" while any range streams, else "comparing" while any range compares, else its
// state's word.
func RepairPhase(p *kvpb.RepairProgress) string {
	if !p.GetState().InFlight() {
		return RepairState(p.GetState())
	}
	if p.GetPaused() != nil {
		return "paused"
	}
	phase := kvpb.RangeRepairState_RANGE_REPAIR_STATE_PENDING
	for _, r := range p.GetRanges() {
		switch r.GetState() {
		case kvpb.RangeRepairState_RANGE_REPAIR_STATE_STREAMING:
			phase = r.GetState()
		case kvpb.RangeRepairState_RANGE_REPAIR_STATE_COMPARING:
			if phase != kvpb.RangeRepairState_RANGE_REPAIR_STATE_STREAMING {
				phase = r.GetState()
			}
		}
	}
	if phase == kvpb.RangeRepairState_RANGE_REPAIR_STATE_PENDING {
		return RepairState(p.GetState())
	}
	return RangeRepair(phase)
}

// RepairRanges is a session's ranges done and in all, from its counters or, when the node
// leaves them unset, from its ranges.
func RepairRanges(p *kvpb.RepairProgress) (done, total int) {
	done, total = int(p.GetRangesDone()), int(p.GetRangesTotal())
	if total == 0 {
		total = len(p.GetRanges())
		if total == 0 {
			total = len(p.GetPlan().GetRanges())
		}
	}
	if done == 0 {
		for _, r := range p.GetRanges() {
			if s := r.GetState(); s == kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE || s == kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED {
				done++
			}
		}
	}
	return done, total
}

// RepairLine is a repair session on one line: "repair #3 on n1: every range, streaming,
// ranges 4/12 (33%), 1.2 MiB streamed at 50.0 KiB/s, ETA 12s".
func RepairLine(p *kvpb.RepairProgress) string {
	done, total := RepairRanges(p)
	l := fmt.Sprintf("repair #%d", p.GetId())
	if c := p.GetCoordinator(); c != "" {
		l += " on " + c
	}
	l += fmt.Sprintf(": %s, %s, ranges %d/%d", Repair(p.GetPlan().GetRequest()), RepairPhase(p), done, total)
	if total > 0 {
		l += fmt.Sprintf(" (%.0f%%)", math.Min(100, 100*float64(done)/float64(total)))
	}
	if b := p.GetBytesStreamed(); b > 0 || p.GetKeysStreamed() > 0 {
		l += fmt.Sprintf(", %d keys, %s streamed", p.GetKeysStreamed(), Bytes(b))
	}
	if r := p.GetRateBytesPerSec(); r > 0 && p.GetState().InFlight() {
		l += fmt.Sprintf(" at %s/s", Bytes(uint64(r)))
	}
	if e := p.GetEtaSeconds(); e > 0 && p.GetState().InFlight() {
		l += ", ETA " + ETA(e)
	}
	if msg := p.GetError(); msg != "" {
		l += " (" + msg + ")"
	}
	return l
}

// RepairContinued says where a session continued from, "" when it did not: "continued by
// n2 after n1 went down, 12 of 64 ranges done before" or "continued after n1 restarted, ...".
func RepairContinued(p *kvpb.RepairProgress) string {
	n := p.GetRangesContinued()
	prev := p.GetPreviousCoordinator()
	if n == 0 && prev == "" {
		return ""
	}
	_, total := RepairRanges(p)
	l := "continued after " + p.GetCoordinator() + " restarted"
	if prev != "" {
		l = "continued by " + p.GetCoordinator() + " after " + prev + " stopped answering"
	}
	return l + fmt.Sprintf(", %d of %d ranges done before (not compared again)", n, total)
}

// RepairPairHeader is the header of a repair's result table; RepairPairRow one row of it.
func RepairPairHeader() []string {
	return []string{"PAIR", "LEAVES", "MISMATCHED", "KEYS A->B", "KEYS B->A", "BYTES"}
}

// RepairPairRow is one replica pair of a repair's result: "n1/n3", leaves compared and
// mismatched, keys the receiver applied each way, bytes streamed.
func RepairPairRow(p *kvpb.PairRepair) []string {
	return []string{
		p.GetA() + "/" + p.GetB(),
		fmt.Sprint(p.GetLeavesCompared()),
		fmt.Sprint(p.GetLeavesMismatched()),
		fmt.Sprintf("%d to %s", p.GetKeysToB(), p.GetB()),
		fmt.Sprintf("%d to %s", p.GetKeysToA(), p.GetA()),
		Bytes(p.GetBytesStreamed()),
	}
}

// RepairOutcome is a finished session on one line: "repair #3 done: every range; 2 of 3
// pairs differed in 14 of 3072 leaves, 120 keys repaired, 15.0 KiB streamed in 4s".
func RepairOutcome(p *kvpb.RepairProgress) string {
	var leaves, mismatched, keys uint64
	differ := 0
	for _, pr := range p.GetPairs() {
		leaves += pr.GetLeavesCompared()
		mismatched += pr.GetLeavesMismatched()
		keys += pr.GetKeysToA() + pr.GetKeysToB()
		if pr.GetLeavesMismatched() > 0 {
			differ++
		}
	}
	if keys == 0 {
		keys = p.GetKeysStreamed()
	}
	l := fmt.Sprintf("repair #%d %s: %s; %d of %d pairs differed in %d of %d leaves",
		p.GetId(), RepairState(p.GetState()), Repair(p.GetPlan().GetRequest()), differ, len(p.GetPairs()), mismatched, leaves)
	if p.GetPlan().GetRequest().GetDryRun() {
		l += ", nothing streamed (dry run)"
	} else {
		l += fmt.Sprintf(", %d keys repaired, %s streamed", keys, Bytes(p.GetBytesStreamed()))
	}
	if s, f := p.GetStartedUnix(), p.GetFinishedUnix(); s > 0 && f >= s {
		l += " in " + Took(s, f)
	}
	if msg := p.GetError(); msg != "" {
		l += " (" + msg + ")"
	}
	return l
}

// Age is how long ago something happened, coarsely: "12s ago", "5m ago", "3h ago",
// "2d ago"; "never" for the zero Unix time.
func Age(unix int64, now time.Time) string {
	if unix <= 0 {
		return "never"
	}
	d := now.Sub(time.Unix(unix, 0))
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

// Hints sums a node's durable hint queues over its peers: "0", or "120 (15.0 KiB)".
func Hints(qs []*kvpb.HintQueue) string {
	var n, b uint64
	for _, q := range qs {
		n += q.GetHints()
		b += q.GetBytes()
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", n, Bytes(b))
}
