package status

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"ringkv/ctl/cli"
	"ringkv/node"
	"ringkv/proto/kvpb"
)

func TestFlags(t *testing.T) {
	ios, _, _, _ := cli.Test()
	f := cli.NewFactory(ios)
	var got *Options
	cmd := NewCmdStatus(f, func(o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--timeout", "3s"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("execute: %v", err)
	}
	if got.Timeout.String() != "3s" {
		t.Errorf("got timeout %v, want 3s", got.Timeout)
	}
	cmd = NewCmdStatus(f, func(*Options) error { return nil })
	cmd.SetArgs([]string{"extra"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.Execute(); err == nil {
		t.Errorf("got no error for an argument, want one")
	}
}

func TestStatusOfCluster(t *testing.T) {
	base := node.DefaultConfig()
	base.VNodes = 8
	c, err := node.StartLocalCluster(context.Background(), 3, base, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	defer c.Close()
	if err := c.Stop(2); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, format := range []string{"table", "json"} {
		ios, _, out, _ := cli.Test()
		f := cli.NewFactory(ios)
		f.Addr, f.Output = c.Node(0).Addrs().GRPC, format
		cmd := NewCmdStatus(f, nil)
		cmd.SetArgs(nil)
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		f.Close()
		if format == "json" {
			var resp struct {
				Epoch uint64 `json:"epoch"` // a number: scripts compare it without tonumber
				Nodes []struct {
					ID, State string
					Info      struct {
						Keys             uint64 `json:"keys"`
						UptimeSeconds    int64  `json:"uptime_seconds"`
						Version          string `json:"version"`
						LastRepairedUnix *int64 `json:"last_repaired_unix"`
						Hints            []any  `json:"hints"`
						HintsDropped     *int64 `json:"hints_dropped"`
					} `json:"info"`
				} `json:"nodes"`
				Repairs []any `json:"repairs"`
			}
			if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
				t.Fatalf("json: %v\n%s", err, out)
			}
			states := map[string]string{}
			for _, n := range resp.Nodes {
				states[n.ID] = n.State
			}
			if resp.Epoch != 1 || states["n1"] != "NODE_STATE_UP" || states["n2"] != "NODE_STATE_UP" || states["n3"] != "NODE_STATE_DOWN" {
				t.Errorf("got epoch %d states %v, want epoch 1, n1 n2 UP, n3 DOWN", resp.Epoch, states)
			}
			if v := resp.Nodes[0].Info.Version; v == "" {
				t.Errorf("got no version of n1, want one")
			}
			// The repair and hint fields are there on every node, set or not: a stable schema.
			if i := resp.Nodes[0].Info; i.LastRepairedUnix == nil || i.Hints == nil || i.HintsDropped == nil || resp.Repairs == nil {
				t.Errorf("got %s\nwant last_repaired_unix, hints, hints_dropped on each node and repairs", out)
			}
			continue
		}
		for _, l := range strings.Split(out.String(), "\n") {
			f := strings.Split(l, "\t")
			if f[0] != "n1" && f[0] != "n2" {
				continue
			}
			// NODE ADDR STATE ROLE EPOCH OPS/S P99 KEYS DISK FREE HINTS LAST-REPAIRED BREAKERS NOTE
			if len(f) != 14 || f[2] != "UP" || !raftRoles[f[3]] || f[10] == "-" || f[11] == "-" || f[12] == "-" {
				t.Errorf("row %q: want 14 columns, UP, a raft role, hints, last repaired and a breaker summary", l)
			}
		}
		if !strings.Contains(out.String(), "2/3 nodes answering") || !strings.Contains(out.String(), "DOWN") {
			t.Errorf("table:\n%s\nwant 2/3 answering and a DOWN row", out)
		}
	}
}

// raftRoles are the roles a row of a founder may show. With one of three voters down, an
// election can be under way when the table is read (seen under load), so "candidate" is one.
var raftRoles = map[string]bool{"leader": true, "voter": true, "candidate": true}

func TestChangeLine(t *testing.T) {
	tests := []struct {
		in   *kvpb.ChangeProgress
		want string
	}{
		{nil, ""},
		{&kvpb.ChangeProgress{State: kvpb.ChangeState_CHANGE_STATE_NONE}, ""},
		{&kvpb.ChangeProgress{Id: 2, State: kvpb.ChangeState_CHANGE_STATE_DONE}, ""},
		{&kvpb.ChangeProgress{Id: 3, State: kvpb.ChangeState_CHANGE_STATE_STREAMING,
			Plan:      &kvpb.ChangePlan{Request: &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REMOVE, NodeId: "n2"}},
			BytesDone: 256 << 10, BytesTotal: 1 << 20, RateBytesPerSec: 64 << 10, EtaSeconds: 12.4},
			"change #3 in flight: remove n2, streaming, 25% (256.0 KiB of 1.0 MiB) at 64.0 KiB/s, ETA 12s"},
		{&kvpb.ChangeProgress{Id: 4, State: kvpb.ChangeState_CHANGE_STATE_HANDING_OVER,
			Plan: &kvpb.ChangePlan{Request: &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4", GrpcAddr: "127.0.0.1:9094"}}},
			"change #4 in flight: add n4 (127.0.0.1:9094), handing-over"},
	}
	for _, tt := range tests {
		if got := changeLine(tt.in); got != tt.want {
			t.Errorf("changeLine(%v): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestPrint: piped output is one tab-separated row per node with every column, and the
// change in flight under the summary line.
func TestPrint(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	resp := &kvpb.StatusResponse{Epoch: 9, Replicas: 3,
		Change: &kvpb.ChangeProgress{Id: 5, State: kvpb.ChangeState_CHANGE_STATE_STREAMING, Plan: &kvpb.ChangePlan{Request: &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REBALANCE}}},
		Repairs: []*kvpb.RepairProgress{
			{Id: 2, Coordinator: "n2", State: kvpb.RepairState_REPAIR_STATE_RUNNING, Plan: &kvpb.RepairPlan{Request: &kvpb.RepairRequest{NodeId: "n3"}},
				RangesDone: 3, RangesTotal: 12, Ranges: []*kvpb.RangeRepair{{State: kvpb.RangeRepairState_RANGE_REPAIR_STATE_COMPARING}}},
			{Id: 1, Coordinator: "n1", State: kvpb.RepairState_REPAIR_STATE_DONE}, // not in flight: no line
		},
		Nodes: []*kvpb.NodeStatus{
			{Id: "n1", GrpcAddr: "127.0.0.1:9091", State: kvpb.NodeState_NODE_STATE_UP, Info: &kvpb.NodeInfoResponse{
				Epoch: 9, Keys: 1200, DiskBytes: 3 << 20, FreeDiskBytes: 40 << 30, OpsPerSec: 812.34, P99Ms: 4.2, RaftRole: kvpb.RaftRole_RAFT_ROLE_LEADER, Version: "v1.2.3",
				Breakers:         []*kvpb.BreakerState{{Peer: "n2", State: kvpb.BreakerState_CLOSED}, {Peer: "n3", State: kvpb.BreakerState_OPEN}},
				Hints:            []*kvpb.HintQueue{{Peer: "n3", Hints: 100, Bytes: 10 << 10}, {Peer: "n2", Hints: 20, Bytes: 5 << 10}},
				LastRepairedUnix: 1_000_000 - 300},
				Slow: &kvpb.SlowReplica{P90Ms: 48, OthersP90Ms: 4.1, Calls: 900, SeenBy: []string{"n2", "n3"}}},
			{Id: "n2", GrpcAddr: "127.0.0.1:9092", State: kvpb.NodeState_NODE_STATE_UP, Info: &kvpb.NodeInfoResponse{Epoch: 8, RaftRole: kvpb.RaftRole_RAFT_ROLE_FOLLOWER, Version: "v1.2.4", HintsDropped: 3}},
			{Id: "n3", GrpcAddr: "127.0.0.1:9093", State: kvpb.NodeState_NODE_STATE_DOWN, Error: "connection refused"},
		}}
	ios, _, out, _ := cli.Test()
	if err := PrintAt(ios, resp, now); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ring epoch 9, replicas 3, 2/3 nodes answering",
		"kvnode versions differ: n1 v1.2.3, n2 v1.2.4",
		"change #5 in flight: rebalance, streaming",
		"repair #2 on n2: n3's ranges, comparing, ranges 3/12 (25%)",
		"NODE\tADDR\tSTATE\tROLE\tEPOCH\tOPS/S\tP99\tKEYS\tDISK\tFREE\tHINTS\tLAST-REPAIRED\tBREAKERS\tNOTE",
		"n1\t127.0.0.1:9091\tUP\tleader\t9\t812.3\t4.20ms\t1200\t3.0 MiB\t40.0 GiB\t120 (15.0 KiB)\t5m ago\topen: n3\tslow for others: p90 48.0ms vs 4.1ms (seen by n2,n3)",
		"n2\t127.0.0.1:9092\tUP\tvoter\t8\t0.0\t–\t0\t0 B\t-\t0, 3 dropped\tnever\tok\tepoch behind (8)",
		"n3\t127.0.0.1:9093\tDOWN\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tconnection refused",
	}
	got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}
}

// TestPrintOrder: the table lists nodes as an operator counts them, n2 before n10.
func TestPrintOrder(t *testing.T) {
	resp := &kvpb.StatusResponse{Epoch: 1, Replicas: 3}
	for _, id := range []string{"n1", "n10", "n11", "n2", "n9"} {
		resp.Nodes = append(resp.Nodes, &kvpb.NodeStatus{Id: id, State: kvpb.NodeState_NODE_STATE_UP, Info: &kvpb.NodeInfoResponse{Epoch: 1}})
	}
	ios, _, out, _ := cli.Test()
	if err := PrintAt(ios, resp, time.Unix(1_000_000, 0)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "n") && f[0] != "nodes" {
			got = append(got, f[0])
		}
	}
	if want := "[n1 n2 n9 n10 n11]"; fmt.Sprint(got) != want {
		t.Errorf("got rows %v, want %s\n%s", got, want, out)
	}
}
