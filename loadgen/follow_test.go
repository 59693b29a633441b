package loadgen

import (
	"strings"
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

// TestFollowChangeSteps: the looks at a change, as the watch and the status poller give
// them (an older look may come after a newer one), make one event per step: begin, first
// chunk, rate, pause, resume, hand-over, commit; a change that ended before the run is no
// event; a member going DOWN and coming back, the epoch and a repair are.
func TestFollowChangeSteps(t *testing.T) {
	log := NewEventLog(nil)
	f := &follower{log: log, now: time.Now, start: time.Unix(1000, 0), nodes: map[string]kvpb.NodeState{}, repairs: map[string]bool{}}
	add := &kvpb.ChangePlan{Request: &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4"}, ToEpoch: 2}
	look := func(id uint64, st kvpb.ChangeState, bytes, rate uint64, finished int64) *kvpb.ChangeProgress {
		return &kvpb.ChangeProgress{Id: id, State: st, Plan: add, BytesDone: bytes, RateLimitBytes: rate, FinishedUnix: finished}
	}
	paused := func(p *kvpb.ChangeProgress) *kvpb.ChangeProgress {
		p.Pauses = []*kvpb.ChangePause{{By: "ops@host", Reason: "peak hour", PausedUnix: 1050}}
		return p
	}
	const (
		streaming = kvpb.ChangeState_CHANGE_STATE_STREAMING
		handing   = kvpb.ChangeState_CHANGE_STATE_HANDING_OVER
		done      = kvpb.ChangeState_CHANGE_STATE_DONE
	)
	up, down := kvpb.NodeState_NODE_STATE_UP, kvpb.NodeState_NODE_STATE_DOWN
	status := func(epoch uint64, n2 kvpb.NodeState, repairs ...*kvpb.RepairProgress) *kvpb.StatusResponse {
		return &kvpb.StatusResponse{Epoch: epoch, Repairs: repairs,
			Nodes: []*kvpb.NodeStatus{{Id: "n1", State: up}, {Id: "n2", State: n2}}}
	}
	f.observeStatus(status(1, up), true)
	for _, p := range []*kvpb.ChangeProgress{
		look(1, done, 10, 0, 900), // the last change, done before the run
		look(2, streaming, 0, 0, 0),
		look(2, streaming, 0, 0, 0),
		look(2, streaming, 100, 0, 0),
		look(2, streaming, 200, 4<<20, 0),
		paused(look(2, changePaused, 300, 4<<20, 0)),
		paused(look(2, changePaused, 300, 4<<20, 0)),
		look(2, streaming, 400, 4<<20, 0),
		look(2, handing, 500, 4<<20, 0),
		look(2, streaming, 400, 4<<20, 0), // the poller's older look
		look(2, done, 500, 4<<20, 1100),
		look(2, done, 500, 4<<20, 1100),
	} {
		f.observeChange(p, false)
	}
	f.observeStatus(status(2, down), false)
	f.observeStatus(status(2, down, &kvpb.RepairProgress{Id: 7, Coordinator: "n1", State: kvpb.RepairState_REPAIR_STATE_RUNNING}), false)
	f.observeStatus(status(2, up), false)

	var got []string
	for _, e := range log.Events() {
		got = append(got, string(e.Kind))
	}
	want := "change-begin,first-chunk,rate,pause,resume,hand-over,commit,epoch,node-down,repair-start,node-up,repair-end"
	if strings.Join(got, ",") != want {
		t.Errorf("events %s\nwant   %s", strings.Join(got, ","), want)
	}
	for _, e := range log.Events() {
		if e.Kind == EventNodeDown && e.Node != "n2" || e.Kind == EventChangeBegin && e.Text != "add n4" ||
			e.Kind == EventPause && e.Text != "add n4 paused by ops@host: peak hour" {
			t.Errorf("event %+v: wrong node or text", e)
		}
	}
}
