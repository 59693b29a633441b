package cluster

import (
	"bytes"
	"encoding/json"
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
