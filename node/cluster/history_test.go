package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
)

// The history keeps each finished change with its prediction; the observation's start
// sample and result are journaled, and all of it survives a snapshot and its restore.
func TestHistoryRecordsAndSurvivesSnapshot(t *testing.T) {
	cur, next := testRings(t)
	f := newFSM("", slog.New(slog.DiscardHandler))
	idx := uint64(0)
	apply := func(cmd command) applyResult {
		t.Helper()
		idx++
		b, _ := json.Marshal(cmd)
		res, _ := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: b}).(applyResult)
		return res
	}
	apply(command{Op: opBootstrap, Ring: &cur})
	pred := &Prediction{DelayMs: 1000, WindowMs: 2000, EstBytes: 4096, Nodes: []NodeLoad{
		{ID: "a", Before: 300, Predicted: 225}, {ID: "b", Before: 300, Predicted: 225},
		{ID: "c", Before: 300, Predicted: 225}, {ID: "d", Predicted: 225},
	}}
	begin := &Change{Kind: KindAdd, NodeID: "d", FromEpoch: 1, Next: next, By: "alice@ops", Prediction: pred,
		Moves: []MoveState{{Start: 1, End: 2, Source: "a", Target: "d"}}}
	if res := apply(command{Op: opBegin, Change: begin, Unix: 100, UnixMs: 100_000}); res.err != nil {
		t.Fatalf("begin: %v", res.err)
	}
	if res := apply(command{Op: opObserve, ChangeID: 1, Observe: &observeCmd{Start: &LoadSample{UnixMs: 1}}}); !errors.Is(res.err, ErrUnknownChange) {
		t.Errorf("observe a change in flight: got %v, want %v", res.err, ErrUnknownChange)
	}
	apply(command{Op: opMoveDone, ChangeID: 1, Move: 0})
	if res := apply(command{Op: opCommit, ChangeID: 1, Unix: 130, UnixMs: 130_500}); res.err != nil {
		t.Fatalf("commit: %v", res.err)
	}
	r := f.load().history.record(1)
	if r == nil || r.Observation != ObservationObserving || r.ObserveFromMs != 131_500 || r.ObserveToMs != 133_500 ||
		r.By != "alice@ops" || r.Outcome != OutcomeCommitted || r.EstBytes != 4096 || len(r.Nodes) != 4 {
		t.Fatalf("after commit: got %+v, want change 1 observing over [131500, 133500] by alice@ops", r)
	}
	start := LoadSample{UnixMs: 131_600, Epoch: 2, Totals: map[string]uint64{"a": 1000, "b": 1000, "c": 1000, "d": 0}}
	if res := apply(command{Op: opObserve, ChangeID: 1, Observe: &observeCmd{Start: &start}}); res.err != nil {
		t.Fatalf("observe start: %v", res.err)
	}

	// Snapshot between the window's start and end: a new leader restored from it finishes
	// the observation.
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&sink{Buffer: &buf}); err != nil {
		t.Fatal(err)
	}
	g := newFSM("", slog.New(slog.DiscardHandler))
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	gr := g.load().history.record(1)
	if gr == nil || gr.Start == nil || gr.Start.Totals["a"] != 1000 || gr.Nodes[3].Predicted != 225 {
		t.Fatalf("restored: got %+v, want the start sample and the prediction", gr)
	}
	f, idx = g, idx+1
	obs := map[string]float64{"a": 230, "b": 220, "c": 300}
	res := apply(command{Op: opObserve, ChangeID: 1, Observe: &observeCmd{Observed: obs, Notes: map[string]string{"d": "restarted during the window"}, FromMs: 131_600, ToMs: 133_600}})
	if res.err != nil {
		t.Fatalf("observed: %v", res.err)
	}
	r = f.load().history.record(1)
	if r.Observation != ObservationObserved || r.Start != nil || r.ObserveToMs != 133_600 {
		t.Errorf("observed: got %s, start %v, to %d, want observed, no sample, to 133600", r.Observation, r.Start, r.ObserveToMs)
	}
	for _, n := range r.Nodes {
		want, ok := obs[n.ID]
		if n.HasObserved != ok || n.Observed != want || (!ok && n.Note == "") {
			t.Errorf("node %s: got %+v, want observed %v (%v) or a note", n.ID, n, want, ok)
		}
	}
	if res := apply(command{Op: opObserve, ChangeID: 1, Observe: &observeCmd{NotObserved: "late"}}); res.err == nil {
		t.Errorf("a second observation of an observed change: got nil, want an error")
	}
}

// The history is bounded, and an aborted change is recorded as not observed.
func TestHistoryBoundAndAbort(t *testing.T) {
	cur, next := testRings(t)
	st := &fsmState{Ring: &cur}
	for i := 1; i <= MaxHistory+3; i++ {
		outcome := OutcomeCommitted
		if i%2 == 0 {
			outcome = OutcomeAborted
		}
		st.recordFinished(&Change{ID: uint64(i), Kind: KindAdd, Next: next, Outcome: outcome,
			Prediction: &Prediction{WindowMs: 1000, Nodes: []NodeLoad{{ID: "a", Before: 1, Predicted: 1}}}}, int64(i)*1000)
	}
	h := st.History
	if len(h.Records) != MaxHistory || h.Records[0].ID != 4 {
		t.Fatalf("got %d records from %d, want %d from 4", len(h.Records), h.Records[0].ID, MaxHistory)
	}
	for _, r := range h.Records[:len(h.Records)-1] {
		if r.Observation != ObservationNotObserved || r.ObservationNote == "" {
			t.Errorf("change %d (%s): got %s %q, want not observed with a reason", r.ID, r.Outcome, r.Observation, r.ObservationNote)
		}
	}
	last := h.Records[len(h.Records)-1]
	if want := fmt.Sprint(ObservationObserving); last.Outcome != OutcomeCommitted || last.Observation != want {
		t.Errorf("last: got %s %s, want committed %s", last.Outcome, last.Observation, want)
	}
}
