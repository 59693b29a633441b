package tui

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"ringkv/proto/kvpb"
)

// TestApply drives the cluster state's reducer with scripts of messages, no terminal: each
// step is a message at a time (ms after the start), and the state after the script is read
// back as the nodes' states, the epoch, the last error and the event log.
func TestApply(t *testing.T) {
	status := func(epoch uint64, ids ...string) StatusMsg {
		r := &kvpb.StatusResponse{Epoch: epoch, Replicas: 3}
		for _, id := range ids {
			r.Nodes = append(r.Nodes, &kvpb.NodeStatus{Id: id, GrpcAddr: id + ":9090", State: kvpb.NodeState_NODE_STATE_UP})
		}
		return StatusMsg{Resp: r}
	}
	ring := func(epoch uint64, ids ...string) RingMsg {
		rs := &kvpb.RingState{Epoch: epoch, Replicas: 3}
		for i, id := range ids {
			rs.Members = append(rs.Members, &kvpb.Member{Id: id, GrpcAddr: id + ":9090", State: kvpb.NodeState_NODE_STATE_UP, Tokens: []uint64{uint64(i+1) << 60}})
		}
		return RingMsg{Resp: &kvpb.RingResponse{Ring: rs}}
	}
	stats := func(id string, epoch uint64) StatsMsg {
		return StatsMsg{Stats: &kvpb.NodeStats{Id: id, Epoch: epoch, OpsPerSec: 10}}
	}
	diskFull := func(id, reason string) StatusMsg {
		return StatusMsg{Resp: &kvpb.StatusResponse{Epoch: 1, Replicas: 3, Nodes: []*kvpb.NodeStatus{
			{Id: id, GrpcAddr: id + ":9090", State: kvpb.NodeState_NODE_STATE_UP, Info: &kvpb.NodeInfoResponse{DiskFull: reason}}}}}
	}
	// back: n1..n3 answering, n1 seeing n3 come back backMs ago after 5 s away (0: it never
	// went); gone: n3 away again, and n1 naming it flapping.
	back := func(backMs uint64) StatusMsg {
		r := &kvpb.StatusResponse{Epoch: 1, Replicas: 3}
		for _, id := range []string{"n1", "n2", "n3"} {
			info := &kvpb.NodeInfoResponse{Id: id, UptimeSeconds: 600}
			switch {
			case id == "n1" && backMs > 0:
				info.Links = []*kvpb.LinkStats{{Peer: "n3", BackAgoMillis: backMs, AwayMillis: 5000}}
			case id == "n3":
				info.UptimeSeconds = int64(backMs/1000) + 1
			}
			r.Nodes = append(r.Nodes, &kvpb.NodeStatus{Id: id, GrpcAddr: id + ":9090", State: kvpb.NodeState_NODE_STATE_UP, Info: info})
		}
		return StatusMsg{Resp: r}
	}
	gone := func() StatusMsg {
		msg := back(0)
		n1, n3 := msg.Resp.Nodes[0], msg.Resp.Nodes[2]
		n1.Info.Gray = []*kvpb.GrayNode{{Node: "n3", Kind: kvpb.GrayNode_FLAPPING, Detail: "went away or came back 3 times in the last 1m0s"}}
		n3.State, n3.Error, n3.Info = kvpb.NodeState_NODE_STATE_DOWN, "Unavailable: connection refused", nil
		return msg
	}
	change := func(id uint64, state kvpb.ChangeState) ChangeMsg {
		return ChangeMsg{Progress: &kvpb.ChangeProgress{Id: id, State: state,
			Plan: &kvpb.ChangePlan{Request: &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REMOVE, NodeId: "n2"}}}}
	}
	type step struct {
		ms  int
		msg tea.Msg
	}
	tests := []struct {
		name       string
		steps      []step
		wantStates string // "id=state ..." in id order
		wantEpoch  uint64
		wantErr    string
		wantEvents []string
		wantRows   bool // the last step changed the heatmap's rows
	}{
		{
			name:       "status names the nodes",
			steps:      []step{{0, status(3, "n1", "n2")}},
			wantStates: "n1=UP n2=UP", wantEpoch: 3,
		},
		{
			name:       "ring adds members and rebuilds the heatmap",
			steps:      []step{{0, status(3, "n1")}, {10, ring(4, "n1", "n2")}},
			wantStates: "n1=UP n2=UP", wantEpoch: 4,
			wantEvents: []string{"ring epoch 3 → 4"}, wantRows: true,
		},
		{
			name:       "a status error is shown and cleared by the next answer",
			steps:      []step{{0, StatusMsg{Err: errors.New("unavailable")}}},
			wantStates: "", wantErr: "status: unavailable",
		},
		{
			name:       "a status error is cleared",
			steps:      []step{{0, StatusMsg{Err: errors.New("unavailable")}}, {10, status(1, "n1")}},
			wantStates: "n1=UP", wantEpoch: 1,
		},
		{
			name:       "a silent node turns DOWN after DownAfter",
			steps:      []step{{0, status(1, "n1", "n2")}, {1000, stats("n1", 1)}, {1600, TickMsg{}}},
			wantStates: "n1=UP n2=DOWN", wantEpoch: 1,
			wantEvents: []string{"node n2 down (no stats for 1.6s)"}, wantRows: true,
		},
		{
			name:       "a tick before the deadline changes nothing",
			steps:      []step{{0, status(1, "n1")}, {1400, TickMsg{}}},
			wantStates: "n1=UP", wantEpoch: 1,
		},
		{
			name:       "a DOWN node's sample brings it back",
			steps:      []step{{0, status(1, "n1")}, {1600, TickMsg{}}, {1700, stats("n1", 1)}},
			wantStates: "n1=UP", wantEpoch: 1,
			wantEvents: []string{"node n1 down (no stats for 1.6s)", "node n1 up"}, wantRows: true,
		},
		{
			name: "a full disk is logged once with its reason, and the room back",
			steps: []step{{0, diskFull("n1", "")}, {10, diskFull("n1", "disk full: 3.9 MiB free of 16.0 MiB, reserve 4.0 MiB (--min-free-disk)")},
				{20, diskFull("n1", "disk full: 3.8 MiB free of 16.0 MiB, reserve 4.0 MiB (--min-free-disk)")}, {30, diskFull("n1", "")}},
			wantStates: "n1=UP", wantEpoch: 1,
			wantEvents: []string{"node n1 DISK FULL: 3.9 MiB free of 16.0 MiB, reserve 4.0 MiB (--min-free-disk); writes refused",
				"node n1 has disk space again: writes resume"},
		},
		{
			name: "a restart is noted once, and no more once the node is named flapping",
			steps: []step{{0, back(0)}, {1000, back(1000)}, {2000, back(2000)}, {3000, back(2900)},
				{7000, gone()}, {8000, gone()}},
			wantStates: "n1=UP n2=UP n3=GRAY", wantEpoch: 1,
			wantEvents: []string{"note: n3 restarted 1s ago after 5s away (flapping if it goes again within a minute)",
				"gray: n3 flapping: went away or came back 3 times in the last 1m0s"},
		},
		{
			name:       "a node restarted again once it settled is noted again",
			steps:      []step{{0, back(1000)}, {40_000, back(2000)}},
			wantStates: "n1=UP n2=UP n3=UP", wantEpoch: 1,
			wantEvents: []string{"note: n3 restarted 1s ago after 5s away (flapping if it goes again within a minute)",
				"note: n3 restarted 2s ago after 5s away (flapping if it goes again within a minute)"},
		},
		{
			name:       "a change is logged once per state",
			steps:      []step{{0, change(5, kvpb.ChangeState_CHANGE_STATE_STREAMING)}, {10, change(5, kvpb.ChangeState_CHANGE_STATE_STREAMING)}, {20, change(5, kvpb.ChangeState_CHANGE_STATE_DONE)}},
			wantEvents: []string{"change #5 streaming: remove n2", "change #5 done: remove n2"},
		},
		{
			name: "a node that left the ring is dropped, and its samples with it",
			steps: []step{{0, status(3, "n1", "n2", "n3")}, {10, ring(3, "n1", "n2", "n3")},
				{20, ring(4, "n1", "n3")}, {30, stats("n2", 4)}, {40, status(4, "n1", "n2", "n3")}},
			wantStates: "n1=UP n3=UP", wantEpoch: 4,
			wantEvents: []string{"ring epoch 3 → 4", "node n2 left the ring"},
		},
		{
			name: "the ring's state wins over an older status",
			steps: []step{{0, status(3, "n1", "n2")}, {10, RingMsg{Resp: &kvpb.RingResponse{Ring: &kvpb.RingState{Epoch: 4, Members: []*kvpb.Member{
				{Id: "n1", State: kvpb.NodeState_NODE_STATE_UP, Tokens: []uint64{1}}, {Id: "n2", State: kvpb.NodeState_NODE_STATE_LEAVING, Tokens: []uint64{2}}}}}}}},
			wantStates: "n1=UP n2=LEAVING", wantEpoch: 4,
			wantEvents: []string{"ring epoch 3 → 4"}, wantRows: true,
		},
		{
			name:  "no change is not logged",
			steps: []step{{0, ChangeMsg{Progress: &kvpb.ChangeProgress{State: kvpb.ChangeState_CHANGE_STATE_NONE}}}},
		},
	}
	start := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newClusterState(start, 1500*time.Millisecond)
			var rows bool
			for _, st := range tt.steps {
				rows = s.apply(st.msg, start.Add(time.Duration(st.ms)*time.Millisecond))
			}
			var states []string
			for _, id := range s.sortedIDs() {
				states = append(states, id+"="+s.nodes[id].displayState())
			}
			if got := strings.Join(states, " "); got != tt.wantStates {
				t.Errorf("got states %q, want %q", got, tt.wantStates)
			}
			if s.epoch != tt.wantEpoch {
				t.Errorf("got epoch %d, want %d", s.epoch, tt.wantEpoch)
			}
			if s.lastErr != tt.wantErr {
				t.Errorf("got error %q, want %q", s.lastErr, tt.wantErr)
			}
			var events []string
			for _, e := range s.events {
				events = append(events, e.text)
			}
			if !slices.Equal(events, tt.wantEvents) {
				t.Errorf("got events %q, want %q", events, tt.wantEvents)
			}
			if rows != tt.wantRows {
				t.Errorf("got rows changed %v, want %v", rows, tt.wantRows)
			}
		})
	}
}

// TestEventTimes: events are stamped with the time they happened where the cluster says so
// (a change's start and end, a node's sample), not when the console saw them, and the log
// stays in time order.
func TestEventTimes(t *testing.T) {
	start := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	s := newClusterState(start, 1500*time.Millisecond)
	req := &kvpb.ChangePlan{Request: &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REMOVE, NodeId: "n2"}}
	s.apply(StatusMsg{Resp: &kvpb.StatusResponse{Epoch: 1, Nodes: []*kvpb.NodeStatus{{Id: "n1", State: kvpb.NodeState_NODE_STATE_UP}}}}, start)
	s.apply(TickMsg{}, start.Add(2*time.Second)) // n1 silent: DOWN, seen now
	s.apply(StatsMsg{Stats: &kvpb.NodeStats{Id: "n1", UnixNanos: start.Add(3 * time.Second).UnixNano()}}, start.Add(5*time.Second))
	s.apply(ChangeMsg{Progress: &kvpb.ChangeProgress{Id: 4, State: kvpb.ChangeState_CHANGE_STATE_DONE, Plan: req,
		StartedUnix: start.Add(-time.Minute).Unix(), FinishedUnix: start.Add(time.Second).Unix()}}, start.Add(6*time.Second))
	var got []string
	for _, e := range s.events {
		got = append(got, e.at.Format("15:04:05")+" "+e.text)
	}
	want := []string{
		"15:04:06 change #4 done: remove n2",
		"15:04:07 node n1 down (no stats for 2s)",
		"15:04:08 node n1 up",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got events %q, want %q", got, want)
	}
}

// TestApplyRepairs: the reducer takes repair sessions from Status (the nodes' NodeInfo.repair
// and StatusResponse.repairs), logs a session seen to start and one seen running that ends,
// not a node's last session first seen finished, and ignores a stale report of one that ended.
func TestApplyRepairs(t *testing.T) {
	req := &kvpb.RepairPlan{Request: &kvpb.RepairRequest{NodeId: "n3"}}
	rp := func(id uint64, coord string, state kvpb.RepairState) *kvpb.RepairProgress {
		return &kvpb.RepairProgress{Id: id, Coordinator: coord, State: state, Plan: req, KeysStreamed: 40, RangesDone: 1, RangesTotal: 4}
	}
	inFlight := func(ps ...*kvpb.RepairProgress) StatusMsg {
		return StatusMsg{Resp: &kvpb.StatusResponse{Epoch: 1, Repairs: ps}}
	}
	lastOf := func(id string, p *kvpb.RepairProgress) StatusMsg {
		return StatusMsg{Resp: &kvpb.StatusResponse{Epoch: 1, Nodes: []*kvpb.NodeStatus{{Id: id, State: kvpb.NodeState_NODE_STATE_UP, Info: &kvpb.NodeInfoResponse{Repair: p}}}}}
	}
	running, done := kvpb.RepairState_REPAIR_STATE_RUNNING, kvpb.RepairState_REPAIR_STATE_DONE
	tests := []struct {
		name       string
		msgs       []tea.Msg
		wantEvents []string
		wantFlight string // "id@coordinator ..."
	}{
		{name: "a session starts and ends",
			msgs:       []tea.Msg{inFlight(rp(3, "n1", running)), inFlight(rp(3, "n1", running)), lastOf("n1", rp(3, "n1", done))},
			wantEvents: []string{"repair #3 on n1 running: n3's ranges", "repair #3 on n1 done: n3's ranges, 40 keys repaired"}},
		{name: "a last session first seen finished is not logged",
			msgs: []tea.Msg{lastOf("n2", rp(2, "n2", done))}},
		{name: "a stale report does not restart a session that ended",
			msgs:       []tea.Msg{inFlight(rp(3, "n1", running)), lastOf("n1", rp(3, "n1", kvpb.RepairState_REPAIR_STATE_ABORTED)), inFlight(rp(3, "n1", running))},
			wantEvents: []string{"repair #3 on n1 running: n3's ranges", "repair #3 on n1 aborted: n3's ranges, 40 keys repaired"}},
		{name: "sessions on two coordinators",
			msgs:       []tea.Msg{inFlight(rp(4, "n2", running), rp(3, "n1", running))},
			wantEvents: []string{"repair #4 on n2 running: n3's ranges", "repair #3 on n1 running: n3's ranges"},
			wantFlight: "3@n1 4@n2"},
		{name: "no session is nothing",
			msgs: []tea.Msg{lastOf("n1", &kvpb.RepairProgress{}), inFlight()}},
	}
	start := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newClusterState(start, time.Hour)
			for i, msg := range tt.msgs {
				s.apply(msg, start.Add(time.Duration(i)*time.Second))
			}
			var events []string
			for _, e := range s.events {
				events = append(events, e.text)
			}
			if !slices.Equal(events, tt.wantEvents) {
				t.Errorf("got events %q, want %q", events, tt.wantEvents)
			}
			var flight []string
			for _, p := range s.repairsInFlight() {
				flight = append(flight, fmt.Sprintf("%d@%s", p.GetId(), p.GetCoordinator()))
			}
			if got := strings.Join(flight, " "); got != tt.wantFlight {
				t.Errorf("got in flight %q, want %q", got, tt.wantFlight)
			}
		})
	}
	// The ETA: the coordinator's, else from the ranges done since the start.
	s := newClusterState(start, time.Hour)
	p := &kvpb.RepairProgress{Id: 1, State: running, RangesDone: 1, RangesTotal: 4, StartedUnix: start.Unix()}
	s.apply(inFlight(p), start.Add(10*time.Second))
	if got := s.repairETA(p); got != 30*time.Second {
		t.Errorf("got ETA %s, want 30s (3 ranges left at 10s each)", got)
	}
	p.EtaSeconds = 7
	if got := s.repairETA(p); got != 7*time.Second {
		t.Errorf("got ETA %s, want the coordinator's 7s", got)
	}
}

// TestJoinedNodeNotDownAtOnce: a node the console first hears of long after it started (one
// that joins the ring) is given DownAfter from then for its first sample, not from the start.
func TestJoinedNodeNotDownAtOnce(t *testing.T) {
	start := fixedNow
	m := newClusterState(start, DefaultDownAfter)
	later := start.Add(time.Minute)
	m.apply(StatusMsg{Resp: &kvpb.StatusResponse{Nodes: []*kvpb.NodeStatus{{Id: "n4", State: kvpb.NodeState_NODE_STATE_UP}}}}, later)
	if m.apply(TickMsg{}, later.Add(DefaultDownAfter/2)); m.nodes["n4"].down {
		t.Errorf("n4 heard of %s ago: got DOWN, want it given %s", DefaultDownAfter/2, DefaultDownAfter)
	}
	if m.apply(TickMsg{}, later.Add(2*DefaultDownAfter)); !m.nodes["n4"].down {
		t.Errorf("n4 silent for %s since heard of: got not DOWN, want DOWN", 2*DefaultDownAfter)
	}
}
