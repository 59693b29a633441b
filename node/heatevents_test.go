package node

import (
	"fmt"
	"testing"
	"time"

	"ringkv/node/cluster"
	"ringkv/proto/kvpb"
)

func TestHeatEvents(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	add := &cluster.Change{ID: 7, Kind: cluster.KindAdd, NodeID: "n4", RateBytes: 1 << 20, StartedUnix: 1_799_999_990}
	faster := *add
	faster.RateBytes = 4 << 20
	committed := *add
	committed.Outcome, committed.FinishedUnix, committed.Next.Epoch = cluster.OutcomeCommitted, 1_800_000_005, 5
	aborted := *add
	aborted.Outcome, aborted.FinishedUnix = cluster.OutcomeAborted, 1_800_000_006
	paused := *add
	paused.Pauses = []cluster.Pause{{By: "alice", Reason: "p99", Unix: 1_799_999_995}}
	resumed := *add
	resumed.Pauses = []cluster.Pause{{By: "alice", Unix: 1_799_999_995, ResumedBy: "bob", ResumedUnix: 1_799_999_998}}
	n4Rate := paused
	n4Rate.NodeRates = map[string]uint64{"n4": 2 << 20}
	running := &kvpb.RepairProgress{Id: 3, Coordinator: "n1", State: kvpb.RepairState_REPAIR_STATE_RUNNING, RateLimitBytes: 1 << 20, StartedUnix: 1_799_999_000}
	slower := &kvpb.RepairProgress{Id: 3, Coordinator: "n1", State: kvpb.RepairState_REPAIR_STATE_RUNNING, RateLimitBytes: 512 << 10, StartedUnix: 1_799_999_000}
	repairPaused := &kvpb.RepairProgress{Id: 3, Coordinator: "n1", State: kvpb.RepairState_REPAIR_STATE_RUNNING, RateLimitBytes: 1 << 20, StartedUnix: 1_799_999_000,
		Paused: &kvpb.ChangePause{By: "alice", Reason: "backup", PausedUnix: 1_799_999_990}}
	done := &kvpb.RepairProgress{Id: 3, Coordinator: "n1", State: kvpb.RepairState_REPAIR_STATE_DONE, KeysStreamed: 12, StartedUnix: 1_799_999_000, FinishedUnix: 1_800_000_001}
	for _, tc := range []struct {
		name      string
		prev, cur eventState
		want      []string // "kind@unix: text"
	}{
		{"nothing happened", eventState{epoch: 4, change: add, repair: running}, eventState{epoch: 4, change: add, repair: running}, nil},
		{"change begun", eventState{epoch: 4}, eventState{epoch: 4, change: add},
			[]string{"change-begin@1799999990: ring change 7 begun: add n4, 1.0 MiB/s"}},
		{"change rate", eventState{epoch: 4, change: add}, eventState{epoch: 4, change: &faster},
			[]string{"rate@1800000000: ring change 7 rate 1.0 MiB/s → 4.0 MiB/s"}},
		{"change paused", eventState{epoch: 4, change: add}, eventState{epoch: 4, change: &paused},
			[]string{"change-pause@1799999995: ring change 7 paused by alice"}},
		{"change resumed", eventState{epoch: 4, change: &paused}, eventState{epoch: 4, change: &resumed},
			[]string{"change-resume@1799999998: ring change 7 resumed by bob"}},
		{"paused and resumed between looks", eventState{epoch: 4, change: add}, eventState{epoch: 4, change: &resumed}, []string{
			"change-pause@1799999995: ring change 7 paused by alice",
			"change-resume@1799999998: ring change 7 resumed by bob",
		}},
		{"a receiver's rate", eventState{epoch: 4, change: &paused}, eventState{epoch: 4, change: &n4Rate},
			[]string{"rate@1800000000: ring change 7 rate of n4 1.0 MiB/s → 2.0 MiB/s"}},
		{"change committed", eventState{epoch: 4, change: add}, eventState{epoch: 5, last: &committed}, []string{
			"change-commit@1800000005: ring change 7 committed: add n4, epoch 5",
			"ring@1800000000: ring epoch 4 → 5",
		}},
		{"change aborted", eventState{epoch: 4, change: add}, eventState{epoch: 4, last: &aborted},
			[]string{"change-abort@1800000006: ring change 7 aborted: add n4"}},
		{"begun and settled between looks", eventState{epoch: 4}, eventState{epoch: 4, last: &aborted},
			[]string{"change-abort@1800000006: ring change 7 aborted: add n4"}},
		{"repair started", eventState{}, eventState{repair: running},
			[]string{"repair-start@1799999000: repair 3 started on n1, 1.0 MiB/s"}},
		{"repair rate", eventState{repair: running}, eventState{repair: slower},
			[]string{"rate@1800000000: repair 3 rate 1.0 MiB/s → 512.0 KiB/s"}},
		{"repair paused", eventState{repair: running}, eventState{repair: repairPaused},
			[]string{"repair-pause@1799999990: repair 3 paused by alice"}},
		{"repair resumed", eventState{repair: repairPaused}, eventState{repair: running},
			[]string{"repair-resume@1800000000: repair 3 resumed"}},
		{"repair ended", eventState{repair: running}, eventState{repair: done},
			[]string{"repair-end@1800000001: repair 3 done: 12 keys repaired"}},
		{"a finished repair seen first is old news", eventState{repair: done}, eventState{repair: done}, nil},
		{"peers lost and found", eventState{down: []string{"n2"}}, eventState{down: []string{"n3"}}, []string{
			"node-down@1800000000: node n3 DOWN (unreachable)",
			"node-up@1800000000: node n2 UP (reachable again)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range heatEvents(tc.prev, tc.cur, now) {
				got = append(got, fmt.Sprintf("%s@%d: %s", e.Kind, e.Time.Unix(), e.Text))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHeatEventsAfterLook: an event the cluster stamped in a whole second that began before
// the previous look (which had not seen it) is kept just after that look, so that it follows
// what that look saw: a change begun, its rate changed and aborted within one second kept
// begin, abort, rate in a fresh CI.
func TestHeatEventsAfterLook(t *testing.T) {
	look := time.Unix(1_800_000_000, 600_000_000)
	begun := &cluster.Change{ID: 7, Kind: cluster.KindAdd, NodeID: "n4", RateBytes: 256, StartedUnix: 1_800_000_000}
	aborted := *begun
	aborted.Outcome, aborted.FinishedUnix = cluster.OutcomeAborted, 1_800_000_000
	evs := heatEvents(eventState{epoch: 4, change: begun, at: look}, eventState{epoch: 4, last: &aborted}, look.Add(time.Second))
	if len(evs) != 1 || evs[0].Kind != "change-abort" {
		t.Fatalf("got %v, want one change-abort", evs)
	}
	if !evs[0].Time.After(look) {
		t.Errorf("change-abort at %v, want after the previous look at %v", evs[0].Time, look)
	}
}
