package present

import (
	"slices"
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

// TestRepairWords: every state of a session and of a range has a word of its own.
func TestRepairWords(t *testing.T) {
	seen := map[string]bool{}
	for v := range kvpb.RepairState_name {
		s := kvpb.RepairState(v)
		w := RepairState(s)
		if w == "" || w == s.String() || seen[w] {
			t.Errorf("RepairState(%v) = %q, want a word of its own", s, w)
		}
		seen[w] = true
	}
	seen = map[string]bool{}
	for v := range kvpb.RangeRepairState_name {
		s := kvpb.RangeRepairState(v)
		w := RangeRepair(s)
		if w == "" || w == s.String() || seen[w] {
			t.Errorf("RangeRepair(%v) = %q, want a word of its own", s, w)
		}
		seen[w] = true
	}
}

func TestRepair(t *testing.T) {
	tests := []struct {
		in   *kvpb.RepairRequest
		want string
	}{
		{nil, "every range"},
		{&kvpb.RepairRequest{}, "every range"},
		{&kvpb.RepairRequest{NodeId: "n2"}, "n2's ranges"},
		{&kvpb.RepairRequest{Vnodes: []uint64{1}}, "1 vnode"},
		{&kvpb.RepairRequest{Vnodes: []uint64{1, 2}, NodeId: "n2"}, "2 vnodes of n2"},
		{&kvpb.RepairRequest{DryRun: true}, "every range (dry run)"},
	}
	for _, tt := range tests {
		if got := Repair(tt.in); got != tt.want {
			t.Errorf("Repair(%v): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRepairLine(t *testing.T) {
	rr := func(s kvpb.RangeRepairState) *kvpb.RangeRepair { return &kvpb.RangeRepair{State: s} }
	tests := []struct {
		name string
		in   *kvpb.RepairProgress
		want string
	}{
		{
			name: "streaming",
			in: &kvpb.RepairProgress{Id: 3, Coordinator: "n1", State: kvpb.RepairState_REPAIR_STATE_RUNNING,
				Plan:       &kvpb.RepairPlan{Request: &kvpb.RepairRequest{NodeId: "n3"}},
				RangesDone: 4, RangesTotal: 12, KeysStreamed: 120, BytesStreamed: 3 << 20, RateBytesPerSec: 50 << 10, EtaSeconds: 12.4,
				Ranges: []*kvpb.RangeRepair{rr(kvpb.RangeRepairState_RANGE_REPAIR_STATE_COMPARING), rr(kvpb.RangeRepairState_RANGE_REPAIR_STATE_STREAMING)}},
			want: "repair #3 on n1: n3's ranges, streaming, ranges 4/12 (33%), 120 keys, 3.0 MiB streamed at 50.0 KiB/s, ETA 12s",
		},
		{
			name: "comparing, counters from the ranges",
			in: &kvpb.RepairProgress{Id: 4, State: kvpb.RepairState_REPAIR_STATE_RUNNING,
				Ranges: []*kvpb.RangeRepair{rr(kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE), rr(kvpb.RangeRepairState_RANGE_REPAIR_STATE_COMPARING),
					rr(kvpb.RangeRepairState_RANGE_REPAIR_STATE_PENDING), rr(kvpb.RangeRepairState_RANGE_REPAIR_STATE_PENDING)}},
			want: "repair #4: every range, comparing, ranges 1/4 (25%)",
		},
		{
			name: "failed",
			in:   &kvpb.RepairProgress{Id: 5, State: kvpb.RepairState_REPAIR_STATE_FAILED, RangesDone: 2, RangesTotal: 2, Error: "n2: unavailable", EtaSeconds: 3},
			want: "repair #5: every range, failed, ranges 2/2 (100%) (n2: unavailable)",
		},
	}
	for _, tt := range tests {
		if got := RepairLine(tt.in); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestRepairResult(t *testing.T) {
	p := &kvpb.RepairProgress{Id: 3, State: kvpb.RepairState_REPAIR_STATE_DONE,
		Plan:        &kvpb.RepairPlan{Request: &kvpb.RepairRequest{}},
		StartedUnix: 100, FinishedUnix: 104, BytesStreamed: 15 << 10,
		Pairs: []*kvpb.PairRepair{
			{A: "n1", B: "n2", LeavesCompared: 1024},
			{A: "n1", B: "n3", LeavesCompared: 1024, LeavesMismatched: 10, KeysToB: 100, BytesStreamed: 12 << 10},
			{A: "n2", B: "n3", LeavesCompared: 1024, LeavesMismatched: 4, KeysToB: 18, KeysToA: 2, BytesStreamed: 3 << 10},
		}}
	if got, want := RepairOutcome(p), "repair #3 done: every range; 2 of 3 pairs differed in 14 of 3072 leaves, 120 keys repaired, 15.0 KiB streamed in 4s"; got != want {
		t.Errorf("RepairOutcome: got %q, want %q", got, want)
	}
	if got, want := RepairPairRow(p.Pairs[2]), []string{"n2/n3", "1024", "4", "18 to n3", "2 to n2", "3.0 KiB"}; !slices.Equal(got, want) {
		t.Errorf("RepairPairRow: got %q, want %q", got, want)
	}
	if got, want := len(RepairPairHeader()), len(RepairPairRow(p.Pairs[0])); got != want {
		t.Errorf("got a header of %d columns for rows of %d", got, want)
	}
	p.Plan.Request.DryRun = true
	p.State = kvpb.RepairState_REPAIR_STATE_DONE
	if got, want := RepairOutcome(p), "repair #3 done: every range (dry run); 2 of 3 pairs differed in 14 of 3072 leaves, nothing streamed (dry run) in 4s"; got != want {
		t.Errorf("RepairOutcome dry run: got %q, want %q", got, want)
	}
}

func TestAge(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for unix, want := range map[int64]string{0: "never", 1_000_000: "just now", 999_988: "12s ago", 999_700: "5m ago",
		1_000_000 - 3*3600: "3h ago", 1_000_000 - 3*86400: "3d ago"} {
		if got := Age(unix, now); got != want {
			t.Errorf("Age(%d): got %q, want %q", unix, got, want)
		}
	}
}

func TestHints(t *testing.T) {
	if got := Hints(nil); got != "0" {
		t.Errorf("Hints(nil): got %q, want 0", got)
	}
	qs := []*kvpb.HintQueue{{Peer: "n2", Hints: 100, Bytes: 10 << 10}, {Peer: "n3", Hints: 20, Bytes: 5 << 10}}
	if got, want := Hints(qs), "120 (15.0 KiB)"; got != want {
		t.Errorf("Hints: got %q, want %q", got, want)
	}
}
