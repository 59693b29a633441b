package cluster

import (
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// TestRepairJournal walks the repair journal through a session's life as raft applies it:
// begin, ranges done, pause and resume, a takeover that fences the old coordinator, the
// end; each refusal with its sentinel; and the journal as a restarted node reads it back.
func TestRepairJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.json")
	f := newFSM(path, slog.New(slog.DiscardHandler))
	index := uint64(0)
	apply := func(op string, unix int64, rc *repairCmd) applyResult {
		index++
		b, _ := json.Marshal(command{Op: op, Unix: unix, Repair: rc})
		res, _ := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: b}).(applyResult)
		return res
	}
	plan := []byte("plan-a")
	steps := []struct {
		name string
		op   string
		unix int64
		rc   *repairCmd
		want error
		id   uint64
	}{
		{"pause with nothing in flight", opRepairPause, 100, &repairCmd{Paused: &Paused{By: "op@h"}}, ErrNoRepairToPause, 0},
		{"resume when not paused", opRepairResume, 100, &repairCmd{}, ErrRepairNotPaused, 0},
		{"begin", opRepairBegin, 100, &repairCmd{Session: &RepairSession{Coordinator: "a", Plan: plan}}, nil, 1},
		{"begin again, same plan (a retried answer)", opRepairBegin, 101, &repairCmd{Session: &RepairSession{Coordinator: "a", Plan: plan}}, nil, 1},
		{"a second session on a", opRepairBegin, 101, &repairCmd{Session: &RepairSession{Coordinator: "a", Plan: []byte("other")}}, ErrRepairRunning, 0},
		{"range 0 done", opRepairRange, 102, &repairCmd{ID: 1, Coordinator: "a", Range: 0, Result: []byte("r0")}, nil, 1},
		{"range from a non-coordinator", opRepairRange, 102, &repairCmd{ID: 1, Coordinator: "b", Range: 1, Result: []byte("r1")}, ErrNotCoordinator, 0},
		{"pause", opRepairPause, 110, &repairCmd{Paused: &Paused{By: "op@h", Reason: "peak"}}, nil, 0},
		{"pause again", opRepairPause, 200, &repairCmd{Paused: &Paused{By: "other@h"}}, ErrRepairAlreadyPaused, 0},
		{"begin while paused", opRepairBegin, 111, &repairCmd{Session: &RepairSession{Coordinator: "b", Plan: plan}}, ErrRepairPaused, 0},
		{"resume", opRepairResume, 130, &repairCmd{}, nil, 0},
		{"take over from a", opRepairTakeover, 140, &repairCmd{ID: 1, From: "a", Coordinator: "b"}, nil, 1},
		{"a, cut off, journals a range", opRepairRange, 141, &repairCmd{ID: 1, Coordinator: "a", Range: 1, Result: []byte("r1")}, ErrNotCoordinator, 0},
		{"b journals a range", opRepairRange, 142, &repairCmd{ID: 1, Coordinator: "b", Range: 1, Result: []byte("r1")}, nil, 1},
		{"b ends it", opRepairEnd, 150, &repairCmd{ID: 1, Coordinator: "b", State: "REPAIR_STATE_DONE"}, nil, 1},
		{"ends again (a retried answer)", opRepairEnd, 151, &repairCmd{ID: 1, Coordinator: "b", State: "REPAIR_STATE_DONE"}, nil, 1},
		{"a range after the end", opRepairRange, 152, &repairCmd{ID: 1, Coordinator: "b", Range: 2}, ErrNotCoordinator, 0},
		{"a new session on a", opRepairBegin, 160, &repairCmd{Session: &RepairSession{Coordinator: "a", Plan: plan}}, nil, 2},
	}
	for _, s := range steps {
		res := apply(s.op, s.unix, s.rc)
		if s.want == nil && res.err != nil || s.want != nil && !errors.Is(res.err, s.want) {
			t.Fatalf("%s: got %v, want %v", s.name, res.err, s.want)
		}
		if s.id != 0 && res.changeID != s.id {
			t.Fatalf("%s: got session %d, want %d", s.name, res.changeID, s.id)
		}
	}
	// A restarted node reads the journal back from its local copy.
	g := newFSM(path, slog.New(slog.DiscardHandler))
	if _, err := g.loadLocal(); err != nil {
		t.Fatal(err)
	}
	j := g.load().repair
	s1 := j.Session(1)
	if s1 == nil || s1.InFlight() || s1.Coordinator != "b" || s1.Previous != "a" || len(s1.Done) != 2 || s1.State != "REPAIR_STATE_DONE" {
		t.Fatalf("session 1 as read back: %+v; want done by b (taken over from a) with 2 ranges", s1)
	}
	if s1.PausedSeconds != 20 {
		t.Errorf("session 1 paused %d s, want 20 (paused at 110, resumed at 130)", s1.PausedSeconds)
	}
	if s2 := j.Session(2); s2 == nil || !s2.InFlight() || j.Paused != nil {
		t.Errorf("session 2 %+v, paused %+v; want in flight, not paused", s2, j.Paused)
	}
}
