package present

import (
	"fmt"
	"strings"
	"time"

	"ringkv/proto/kvpb"
)

// OffFlag marks a node whose observed load strays from its prediction by more than the
// tolerance (NodeLoadPrediction.off).
const OffFlag = "OFF BY >25%"

var outcomeWords = map[kvpb.ChangeOutcome]string{
	kvpb.ChangeOutcome_CHANGE_OUTCOME_DONE:    "done",
	kvpb.ChangeOutcome_CHANGE_OUTCOME_ABORTED: "aborted",
}

// Outcome is the word for how a finished change ended: "done" or "aborted".
func Outcome(o kvpb.ChangeOutcome) string {
	if w, ok := outcomeWords[o]; ok {
		return w
	}
	return "unknown"
}

// RecordTitle is one line naming a finished change: "change 7 rebalance (4 vnodes) by
// alice@ops1: done 19:20:13 UTC, took 12s, 3.1 MiB planned".
func RecordTitle(r *kvpb.ChangeRecord) string {
	what := Kind(r.GetKind())
	if r.GetKind() == kvpb.ChangeRequest_REBALANCE {
		what = fmt.Sprintf("rebalance (%d vnodes)", r.GetVnodesMoved())
	} else if r.GetNodeId() != "" {
		what += " " + r.GetNodeId()
	}
	s := fmt.Sprintf("change %d %s", r.GetId(), what)
	if r.GetBy() != "" {
		s += " by " + r.GetBy()
	}
	took := time.Duration(r.GetFinishedUnixMs()-r.GetStartedUnixMs()) * time.Millisecond
	s += fmt.Sprintf(": %s %s, took %s, %s planned", Outcome(r.GetOutcome()), clock(r.GetFinishedUnixMs()), Duration(took), kvpb.FormatBytes(r.GetEstBytes()))
	return s
}

// Observation says where the observation of a change's load stands: "observing: result at
// 19:22:13 UTC", "observed 19:21:13-19:22:13 UTC", "not observed: aborted: ...".
func Observation(r *kvpb.ChangeRecord) string {
	switch r.GetObservation() {
	case kvpb.Observation_OBSERVATION_OBSERVING:
		return "observing: result at " + clock(r.GetObserveToUnixMs())
	case kvpb.Observation_OBSERVATION_OBSERVED:
		return fmt.Sprintf("observed %s-%s", strings.TrimSuffix(clock(r.GetObserveFromUnixMs()), " UTC"), clock(r.GetObserveToUnixMs()))
	case kvpb.Observation_OBSERVATION_NOT_OBSERVED:
		return "not observed: " + r.GetObservationNote()
	}
	return "no observation"
}

func clock(ms int64) string { return time.UnixMilli(ms).UTC().Format("15:04:05") + " UTC" }

// PredictionHeader and PredictionRow are the table of a change's load per node, in replica
// ops/s: before -> predicted -> observed, the error, and OffFlag.
func PredictionHeader() []string {
	return []string{"NODE", "BEFORE", "", "PREDICTED", "", "OBSERVED", "ERROR", ""}
}

// PredictionRow is one node's row of the table (PredictionHeader).
func PredictionRow(n *kvpb.NodeLoadPrediction) []string {
	obs, errPct, flag := "-", "-", ""
	if n.GetObservedOk() {
		obs = load(n.GetObserved())
	} else if n.GetNote() != "" {
		flag = n.GetNote()
	}
	if n.GetErrorOk() {
		errPct = fmt.Sprintf("%+.1f%%", 100*n.GetError())
	}
	if n.GetOff() {
		flag = OffFlag
	}
	return []string{n.GetId(), load(n.GetBefore()), "->", load(n.GetPredicted()), "->", obs, errPct, flag}
}

func load(v float64) string { return fmt.Sprintf("%.0f/s", v) }

// PredictionLines lays out a change's title, observation and per-node table as text lines
// with aligned columns.
func PredictionLines(r *kvpb.ChangeRecord) []string {
	lines := []string{RecordTitle(r), "  " + Observation(r)}
	if len(r.GetNodes()) == 0 {
		return lines
	}
	rows := [][]string{PredictionHeader()}
	for _, n := range r.GetNodes() {
		rows = append(rows, PredictionRow(n))
	}
	return append(lines, Columns(rows, "  ")...)
}

// Columns aligns rows of cells into lines: every column but the last padded to its widest
// cell, numbers (cells starting with a digit, a sign or "-") and the first row's titles
// right-aligned but in the first column; trailing blanks trimmed.
func Columns(rows [][]string, indent string) []string {
	var w []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(w) {
				w = append(w, 0)
			}
			w[i] = max(w[i], len(c))
		}
	}
	out := make([]string, 0, len(rows))
	for ri, r := range rows {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range r {
			if i > 0 {
				b.WriteString(" ")
			}
			switch {
			case i == len(r)-1:
				b.WriteString(c)
			case i > 0 && (numeric(c) || ri == 0):
				fmt.Fprintf(&b, "%*s", w[i], c)
			default:
				fmt.Fprintf(&b, "%-*s", w[i], c)
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}

func numeric(c string) bool {
	return c != "" && strings.ContainsAny(c[:1], "0123456789+-") && c != "->"
}
