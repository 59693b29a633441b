package present

import (
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

// TestStalledRanges: each cause of a stall names the node at fault and since when.
func TestStalledRanges(t *testing.T) {
	since := time.Date(2026, 11, 25, 16, 40, 2, 0, time.UTC).Unix()
	stall := func(c kvpb.StallCause, reason, err string) *kvpb.MoveStall {
		return &kvpb.MoveStall{Cause: c, Source: "n1", Receiver: "n4", SinceUnix: since, Reason: reason, Error: err}
	}
	for _, tt := range []struct {
		stalls []*kvpb.MoveStall
		want   string
	}{
		{nil, ""},
		{[]*kvpb.MoveStall{stall(kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE, "", "connection refused")},
			"1 range stalled: source n1 unreachable since 2026-11-25T16:40:02Z: connection refused"},
		{[]*kvpb.MoveStall{stall(kvpb.StallCause_STALL_CAUSE_NO_DATA, "", ""), stall(kvpb.StallCause_STALL_CAUSE_NO_DATA, "", "")},
			"2 ranges stalled: no data from n1 since 2026-11-25T16:40:02Z"},
		{[]*kvpb.MoveStall{stall(kvpb.StallCause_STALL_CAUSE_REFUSED, "STALE_VIEW", "stale ring view")},
			"1 range stalled: refused by n1 (STALE_VIEW) since 2026-11-25T16:40:02Z: stale ring view"},
		{[]*kvpb.MoveStall{stall(kvpb.StallCause_STALL_CAUSE_DISK_FULL, "DISK_FULL", "disk full")},
			"1 range stalled: receiver n4's disk full since 2026-11-25T16:40:02Z: disk full"},
	} {
		p := &kvpb.ChangeProgress{StalledMoves: uint32(len(tt.stalls)), Ranges: []*kvpb.RangeProgress{{}}}
		for _, s := range tt.stalls {
			p.Ranges = append(p.Ranges, &kvpb.RangeProgress{Stall: s})
		}
		if got := StalledRanges(p); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
		if len(tt.stalls) > 0 && RangeState(p.Ranges[1]) != "stalled" {
			t.Errorf("RangeState of a stalled range: got %q, want stalled", RangeState(p.Ranges[1]))
		}
	}
}
