package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"ringkv/node/ring"
)

func testRings(t *testing.T) (cur, next RingState) {
	t.Helper()
	ids := []string{"a", "b", "c"}
	tokens := ring.FounderTokens(ids, 8)
	var ms []ring.Member
	for _, id := range ids {
		ms = append(ms, ring.Member{ID: id, Addr: id + ":1", Tokens: tokens[id]})
	}
	r, err := ring.New(1, 3, ms)
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.WithMember(ring.Member{ID: "d", Addr: "d:1"}, 8)
	if err != nil {
		t.Fatal(err)
	}
	return ringStateOf(r), ringStateOf(n)
}

func TestFSMSnapshotAndLocalCopy(t *testing.T) {
	cur, next := testRings(t)
	path := filepath.Join(t.TempDir(), "ring.json")
	f := newFSM(path, slog.New(slog.DiscardHandler))
	apply := func(f *fsm, index uint64, cmd command) applyResult {
		b, _ := json.Marshal(cmd)
		res, _ := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: b}).(applyResult)
		return res
	}
	apply(f, 1, command{Op: opBootstrap, Ring: &cur})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&sink{Buffer: &buf}); err != nil {
		t.Fatal(err)
	}
	begin := &Change{Kind: KindAdd, NodeID: "d", FromEpoch: 1, Next: next}
	if res := apply(f, 2, command{Op: opBegin, Change: begin}); res.err != nil || res.changeID != 1 {
		t.Fatalf("begin: got %+v, want change 1", res)
	}

	// A restart: the local copy is at index 2, raft restores the snapshot of index 1 and
	// replays index 2; the FSM must neither go back nor apply the begin twice.
	g := newFSM(path, slog.New(slog.DiscardHandler))
	if ok, err := g.loadLocal(); !ok || err != nil {
		t.Fatalf("load local: got %v, %v, want true, nil", ok, err)
	}
	if err := g.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if res := apply(g, 2, command{Op: opBegin, Change: begin}); res.err != nil {
		t.Fatalf("replayed begin: got %v, want skipped", res.err)
	}
	if got := g.load().change; got == nil || got.ID != 1 {
		t.Fatalf("after restart: got change %+v, want 1", got)
	}
	// A fresh node installing the snapshot gets the snapshot's state.
	h := newFSM("", slog.New(slog.DiscardHandler))
	if err := h.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got := h.load(); got.view == nil || got.view.Current.Epoch() != 1 || got.change != nil {
		t.Fatalf("restored snapshot: got %+v, want epoch 1 and no change", got)
	}
}

type sink struct{ *bytes.Buffer }

func (sink) ID() string    { return "test" }
func (sink) Cancel() error { return nil }
func (sink) Close() error  { return nil }

func TestFounderConfiguration(t *testing.T) {
	tests := []struct {
		founders, maxVoters int
		wantVoters          int
	}{
		{1, 5, 1},
		{2, 5, 1},
		{3, 5, 3},
		{4, 5, 3},
		{5, 5, 5},
		{6, 5, 5},
		{7, 5, 5},
		{9, 5, 5},
		{4, 3, 3},
		{8, 4, 3},
	}
	for _, tt := range tests {
		var peers []Peer
		for i := range tt.founders {
			peers = append(peers, Peer{ID: string(rune('z' - i)), Addr: string(rune('a' + i))})
		}
		conf := founderConfiguration(peers, tt.maxVoters)
		voters := 0
		for _, s := range conf.Servers {
			if s.Suffrage == raft.Voter {
				voters++
			}
		}
		if got := len(conf.Servers); got != tt.founders {
			t.Errorf("%d founders: got %d servers, want %d", tt.founders, got, tt.founders)
		}
		if voters != tt.wantVoters {
			t.Errorf("%d founders, max %d: got %d voters, want %d", tt.founders, tt.maxVoters, voters, tt.wantVoters)
		}
	}
}

// TestFSMPauseRateParallel drives the pace commands of a change through the state machine:
// their refusals, and a pause that a snapshot, its restore and the local copy all keep.
func TestFSMPauseRateParallel(t *testing.T) {
	cur, next := testRings(t)
	path := filepath.Join(t.TempDir(), "ring.json")
	f := newFSM(path, slog.New(slog.DiscardHandler))
	index := uint64(0)
	apply := func(cmd command) error {
		t.Helper()
		index++
		b, _ := json.Marshal(cmd)
		res, _ := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: b}).(applyResult)
		return res.err
	}
	if err := apply(command{Op: opBootstrap, Ring: &cur}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		cmd  command
		want error
	}{
		{"pause with no change", command{Op: opPause, By: "alice"}, ErrNothingToPause},
		{"resume with no change", command{Op: opResume, By: "alice"}, ErrNotPaused},
		{"parallel with no change", command{Op: opParallel, Parallel: 2}, ErrNoChange},
		{"begin", command{Op: opBegin, Change: &Change{Kind: KindAdd, NodeID: "d", FromEpoch: 1, Next: next,
			Moves: []MoveState{{Start: 1, End: 2, Source: "a", Target: "d"}, {Start: 2, End: 3, Source: "b", Target: "d"}}}, Unix: 100}, nil},
		{"resume unpaused", command{Op: opResume, By: "alice"}, ErrNotPaused},
		{"pause", command{Op: opPause, By: "alice", Reason: "p99 spike", Unix: 110}, nil},
		{"pause again", command{Op: opPause, By: "bob", Unix: 111}, ErrAlreadyPaused},
		{"rate of an unknown node", command{Op: opSetRate, NodeID: "zz", RateBytes: 1}, ErrUnknownMember},
		{"rate of the newcomer", command{Op: opSetRate, NodeID: "d", RateBytes: 5 << 20}, nil},
		{"unthrottled source", command{Op: opSetRate, NodeID: "a", RateBytes: 0}, nil},
		{"parallel 0", command{Op: opParallel, Parallel: 0}, ErrInvalidArgument},
		{"parallel 2", command{Op: opParallel, Parallel: 2}, nil},
	}
	for _, s := range steps {
		err := apply(s.cmd)
		if (s.want == nil) != (err == nil) || (s.want != nil && !errors.Is(err, s.want)) {
			t.Fatalf("%s: got %v, want %v", s.name, err, s.want)
		}
	}
	check := func(what string, ch *Change, wantPaused bool) {
		t.Helper()
		if ch == nil {
			t.Fatalf("%s: no change in flight", what)
		}
		p := ch.Paused()
		if (p != nil) != wantPaused {
			t.Fatalf("%s: got paused %+v, want paused %v", what, p, wantPaused)
		}
		if wantPaused && (p.By != "alice" || p.Reason != "p99 spike" || p.Unix != 110) {
			t.Fatalf("%s: got pause %+v, want alice at 110 for p99 spike", what, *p)
		}
		if ch.RateFor("d") != 5<<20 || ch.RateFor("a") != 0 || ch.RateFor("b") != ch.RateBytes || ch.Parallel != 2 {
			t.Fatalf("%s: got rates %v, parallel %d, want d 5 MiB/s, a unthrottled, parallel 2", what, ch.NodeRates, ch.Parallel)
		}
	}
	check("applied", f.load().change, true)

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&sink{Buffer: &buf}); err != nil {
		t.Fatal(err)
	}
	restored := newFSM("", slog.New(slog.DiscardHandler))
	if err := restored.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	check("restored from a snapshot", restored.load().change, true)
	local := newFSM(path, slog.New(slog.DiscardHandler))
	if ok, err := local.loadLocal(); !ok || err != nil {
		t.Fatalf("load local: got %v, %v, want true, nil", ok, err)
	}
	check("restarted from the local copy", local.load().change, true)

	if err := apply(command{Op: opResume, By: "bob", Unix: 130}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	ch := f.load().change
	check("resumed", ch, false)
	if got := ch.Pauses[0]; got.ResumedBy != "bob" || got.ResumedUnix != 130 {
		t.Fatalf("resumed: got pause %+v, want resumed by bob at 130", got)
	}
	if got := ch.PausedFor(time.Unix(500, 0)); got != 20*time.Second {
		t.Fatalf("paused for: got %v, want 20s", got)
	}
	if err := apply(command{Op: opPause, By: "carol", Unix: 140}); err != nil {
		t.Fatalf("second pause: %v", err)
	}
	if got := f.load().change.PausedFor(time.Unix(150, 0)); got != 30*time.Second {
		t.Fatalf("paused for, paused again: got %v, want 30s", got)
	}
	// Abort still works while paused.
	if err := apply(command{Op: opAbort, Unix: 160}); err != nil {
		t.Fatalf("abort while paused: %v", err)
	}
	if p := f.load(); p.change != nil || p.last.Outcome != OutcomeAborted {
		t.Fatalf("after abort: got change %+v, last %+v, want none in flight and the last aborted", p.change, p.last)
	}
}
