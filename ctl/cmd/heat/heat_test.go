package heat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

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

func execute(t *testing.T, addr string, json bool, args ...string) (string, error) {
	t.Helper()
	if json {
		args = append([]string{"-o", "json"}, args...)
	}
	out, _, err := cli.RunAt(context.Background(), addr, func(f *cli.Factory) *cobra.Command { return NewCmdHeat(f, nil) }, args...)
	return out, err
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
