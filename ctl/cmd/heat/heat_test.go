package heat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"ringkv/ctl/cli"
	"ringkv/internal/clustertest"
	"ringkv/internal/testclock"
	"ringkv/node"
	"ringkv/proto/kvpb"
)

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--since", "24h", "--metric", "p99", "--step", "1m"}, true},
		{[]string{"--metric", "latency"}, false},
		{[]string{"--step", "30s"}, false},
		{[]string{"--since", "0s"}, false},
		{[]string{"--since", "200h"}, false},
		{[]string{"extra"}, false},
	} {
		ios, _, _, _ := cli.Test()
		cmd := NewCmdHeat(cli.NewFactory(ios), func(*Options) error { return nil })
		cmd.SetArgs(tc.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		if (err == nil) != tc.ok {
			t.Errorf("%v: got error %v, want ok %v", tc.args, err, tc.ok)
		}
		if !tc.ok && tc.args[0] != "extra" && cli.ExitCode(err) != cli.ExitUsage {
			t.Errorf("%v: got exit %d, want %d", tc.args, cli.ExitCode(err), cli.ExitUsage)
		}
	}
}

// TestMergeNoData: steps no node saw are null, and a window with none is one line, exit 4.
func TestMergeNoData(t *testing.T) {
	rep := &kvpb.HeatResponse{Node: "n1", StepSeconds: 10, Buckets: 256, ColumnsUnixNanos: []int64{0, 10e9}, Present: []bool{false, false}, Values: make([]uint64, 512)}
	_, err := merge([]*kvpb.HeatResponse{rep}, "ops")
	if err == nil || !errors.Is(err, cli.ErrNotFound) || !strings.Contains(err.Error(), "no data since") {
		t.Fatalf("got %v, want no data", err)
	}
	rep2 := &kvpb.HeatResponse{Node: "n2", StepSeconds: 10, Buckets: 256, ColumnsUnixNanos: []int64{10e9}, Present: []bool{true}, Values: make([]uint64, 256)}
	rep2.Values[3] = 7
	res, err := merge([]*kvpb.HeatResponse{rep, rep2}, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if res.Values[3][0] != nil || res.Values[3][1] == nil || *res.Values[3][1] != 7 || res.Values[4][1] == nil || *res.Values[4][1] != 0 {
		t.Errorf("got %v %v, want no data then 7, and zero elsewhere", res.Values[3], res.Values[4])
	}
}

func execute(t *testing.T, addr string, json bool, args ...string) (string, error) {
	t.Helper()
	ios, _, out, _ := cli.Test()
	f := cli.NewFactory(ios)
	defer f.Close()
	f.Addr = addr
	if json {
		f.Output = "json"
	}
	cmd := NewCmdHeat(f, nil)
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestHeatOfCluster: a real 3-node cluster's writes and reads show in the merged heat, with
// the nodes' start events; the table fits the width asked for.
func TestHeatOfCluster(t *testing.T) {
	clk := testclock.New(time.Now().Truncate(time.Minute))
	base := node.DefaultConfig()
	base.VNodes = 8
	base.Now = clk.Now
	c := clustertest.Start(t, 3, base)
	ctx := context.Background()
	for i := range 3 {
		kv, err := cli.NewFactory(&cli.IOStreams{}).KV(c.Node(i).Addrs().GRPC)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 20 {
			k := []byte(fmt.Sprintf("key-%d-%d", i, j))
			if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: k, Value: []byte("v")}); err != nil {
				t.Fatalf("put: %v", err)
			}
			if _, err := kv.Get(ctx, &kvpb.GetRequest{Key: k}); err != nil {
				t.Fatalf("get: %v", err)
			}
		}
	}
	clk.Advance(10 * time.Second)
	addr := c.Node(0).Addrs().GRPC
	out, err := execute(t, addr, true, "--since", "2m", "--step", "10s", "--metric", "writes")
	if err != nil {
		t.Fatalf("heat: %v", err)
	}
	var res struct {
		Columns []time.Time `json:"columns"`
		Rows    []string    `json:"rows"`
		Values  [][]*uint64 `json:"values"`
		Events  []struct {
			Kind string `json:"kind"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("json: %v", err)
	}
	var writes uint64
	nulls := 0
	for _, row := range res.Values {
		for _, v := range row {
			if v == nil {
				nulls++
			} else {
				writes += *v
			}
		}
	}
	starts := 0
	for _, e := range res.Events {
		if e.Kind == "node-start" {
			starts++
		}
	}
	if len(res.Rows) != 256 || len(res.Values) != 256 || len(res.Columns) < 2 || writes != 60 || starts != 3 {
		t.Errorf("got %d rows, %d columns, %d writes, %d starts: want 256 rows, 2+ columns, 60 writes, 3 starts", len(res.Rows), len(res.Columns), writes, starts)
	}
	if nulls == 0 {
		t.Errorf("the steps before the nodes started: got no nulls, want no data")
	}

	out, err = execute(t, addr, false, "--since", "5m", "--width", "50")
	if err != nil {
		t.Fatalf("heat table: %v", err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for _, l := range lines[1:18] {
		if n := len([]rune(l)); n > 50 {
			t.Errorf("line %q is %d wide, want at most 50", l, n)
		}
	}
	if !strings.Contains(out, "0xf0-0xff ") || !strings.Contains(out, "legend: - no data") || !strings.Contains(out, "node-start") {
		t.Errorf("table lacks rows, legend or events:\n%s", out)
	}
	_, err = execute(t, addr, false, "--width", "30")
	if err == nil || cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), "the terminal is 30 columns wide") {
		t.Errorf("narrow: got %v (exit %d), want one line, exit 2", err, cli.ExitCode(err))
	}
}

// TestMergeEvents: an event every node kept (a ring change) or several did (a peer DOWN, seen
// seconds apart) is listed once with the nodes that kept it; the same text later is another.
func TestMergeEvents(t *testing.T) {
	at := func(s int) int64 { return time.Unix(1_800_000_000+int64(s), 0).UnixNano() }
	rep := func(node string, evs ...*kvpb.HeatEvent) *kvpb.HeatResponse {
		return &kvpb.HeatResponse{Node: node, StepSeconds: 10, Buckets: 256, ColumnsUnixNanos: []int64{at(0)}, Present: []bool{true}, Values: make([]uint64, 256), Events: evs}
	}
	begin := &kvpb.HeatEvent{UnixNanos: at(1), Kind: "change-begin", Text: "ring change 7 begun: add n4, unpaced"}
	down := func(s int) *kvpb.HeatEvent {
		return &kvpb.HeatEvent{UnixNanos: at(s), Kind: "node-down", Text: "node n2 DOWN (unreachable)"}
	}
	res, err := merge([]*kvpb.HeatResponse{
		rep("n1", begin, down(5), down(100)),
		rep("n3", begin, down(7)),
	}, "ops")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range res.Events {
		got = append(got, fmt.Sprintf("%d %s %v", e.Time.Unix()-1_800_000_000, e.Kind, e.Nodes))
	}
	want := []string{"1 change-begin [n1 n3]", "5 node-down [n1 n3]", "100 node-down [n1]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got events %q, want %q", got, want)
	}
}
