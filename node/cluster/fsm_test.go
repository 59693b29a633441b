package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

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

type fsmStep struct {
	cmd     command
	wantErr error
	epoch   uint64
	change  bool
}

func TestFSMApply(t *testing.T) {
	cur, next := testRings(t)
	begin := &Change{Kind: KindAdd, NodeID: "d", FromEpoch: 1, Next: next, Moves: []MoveState{{Source: "a", Target: "d"}, {Source: "b", Target: "d"}}}
	stale := &Change{Kind: KindAdd, NodeID: "d", FromEpoch: 7, Next: next}
	tests := []struct {
		name  string
		steps []fsmStep
	}{
		{"commit after all moves", []fsmStep{
			{cmd: command{Op: opBegin, Change: begin}, wantErr: ErrNoRing},
			{cmd: command{Op: opBootstrap, Ring: &cur}, epoch: 1},
			{cmd: command{Op: opBootstrap, Ring: &next}, epoch: 1}, // second bootstrap: no-op
			{cmd: command{Op: opBegin, Change: stale}, wantErr: ErrChangeInFlight, epoch: 1},
			{cmd: command{Op: opBegin, Change: begin}, epoch: 1, change: true},
			{cmd: command{Op: opBegin, Change: begin}, wantErr: ErrChangeInFlight, epoch: 1, change: true},
			{cmd: command{Op: opMoveDone, ChangeID: 1, Move: 0}, epoch: 1, change: true},
			{cmd: command{Op: opMoveDone, ChangeID: 1, Move: 0}, epoch: 1, change: true}, // idempotent
			{cmd: command{Op: opMoveDone, ChangeID: 2, Move: 1}, wantErr: ErrNoChange, epoch: 1, change: true},
			{cmd: command{Op: opMoveDone, ChangeID: 1, Move: 5}, wantErr: ErrInvalidArgument, epoch: 1, change: true},
			{cmd: command{Op: opCommit, ChangeID: 1}, wantErr: ErrInvalidArgument, epoch: 1, change: true},
			{cmd: command{Op: opMoveDone, ChangeID: 1, Move: 1}, epoch: 1, change: true},
			{cmd: command{Op: opCommit, ChangeID: 1}, epoch: 2},
			{cmd: command{Op: opAbort}, wantErr: ErrNoChange, epoch: 2},
		}},
		{"abort keeps the epoch", []fsmStep{
			{cmd: command{Op: opBootstrap, Ring: &cur}, epoch: 1},
			{cmd: command{Op: opBegin, Change: begin}, epoch: 1, change: true},
			{cmd: command{Op: opSetRate, RateBytes: 5}, epoch: 1, change: true},
			{cmd: command{Op: opAbort, ChangeID: 1}, epoch: 1},
			{cmd: command{Op: opBegin, Change: begin}, epoch: 1, change: true},
			{cmd: command{Op: "nope"}, wantErr: ErrInvalidArgument, epoch: 1, change: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFSM(filepath.Join(t.TempDir(), "ring.json"), slog.New(slog.DiscardHandler))
			for i, s := range tt.steps {
				b, _ := json.Marshal(s.cmd)
				res, _ := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: b}).(applyResult)
				if !errors.Is(res.err, s.wantErr) || (s.wantErr == nil && res.err != nil) {
					t.Fatalf("step %d %s: got error %v, want %v", i, s.cmd.Op, res.err, s.wantErr)
				}
				p := f.load()
				var epoch uint64
				if p.view != nil {
					epoch = p.view.Current.Epoch()
				}
				if epoch != s.epoch {
					t.Fatalf("step %d %s: got epoch %d, want %d", i, s.cmd.Op, epoch, s.epoch)
				}
				if got := p.change != nil; got != s.change {
					t.Fatalf("step %d %s: got change in flight %v, want %v", i, s.cmd.Op, got, s.change)
				}
				if got := p.view != nil && p.view.Next != nil; got != s.change {
					t.Fatalf("step %d %s: got next ring %v, want %v", i, s.cmd.Op, got, s.change)
				}
			}
		})
	}
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
		{3, 5, 3},
		{5, 5, 5},
		{7, 5, 5},
		{4, 3, 3},
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
