package vnodes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/oncall"
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
		{[]string{"--node", "n1", "--sort", "errors"}, true},
		{[]string{"--sort", "keys"}, true},
		{[]string{"--sort", "latency"}, false},
		{[]string{"--timeout", "0s"}, false},
		{[]string{"extra"}, false},
	} {
		ios, _, _, _ := cli.Test()
		cmd := NewCmdVnodes(cli.NewFactory(ios), func(*Options) error { return nil })
		cmd.SetArgs(tc.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		if (err == nil) != tc.ok {
			t.Errorf("%v: got error %v, want ok %v", tc.args, err, tc.ok)
		}
		if err != nil && tc.args[0] != "extra" && cli.ExitCode(err) != 2 { // cobra's own errors exit 2 in ctl.Main
			t.Errorf("%v: got exit %d, want 2", tc.args, cli.ExitCode(err))
		}
	}
}

func execute(t *testing.T, addr string, args ...string) (string, string, error) {
	t.Helper()
	return cli.RunAt(context.Background(), addr, func(f *cli.Factory) *cobra.Command { return NewCmdVnodes(f, nil) }, args...)
}

// TestVnodesOfCluster: writes coordinated by two nodes of a real 3-node cluster are merged
// per vnode; every vnode of the ring is listed with its range, owner and replicas; --node
// keeps the vnodes a node replicates; an unknown node is a usage error.
func TestVnodesOfCluster(t *testing.T) {
	clk := testclock.New(time.Now().Truncate(time.Minute))
	base := node.DefaultConfig()
	base.VNodes = 8
	base.Replicas = 2
	base.Now = clk.Now
	c := clustertest.Start(t, 3, base)
	ctx := context.Background()
	for i := range 2 {
		kv, err := cli.NewFactory(&cli.IOStreams{}).KV(c.Node(i).Addrs().GRPC)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 60 {
			if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: []byte(fmt.Sprintf("k-%d-%d", i, j)), Value: []byte("v")}); err != nil {
				t.Fatalf("put: %v", err)
			}
		}
	}
	clk.Advance(5 * time.Second)
	addr := c.Node(0).Addrs().GRPC
	out, _, err := execute(t, addr, "-o", "json", "--sort", "ops")
	if err != nil {
		t.Fatalf("vnodes: %v", err)
	}
	var res oncall.Vnodes
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	var writes uint64
	for i, v := range res.Vnodes {
		writes += v.Writes
		if len(v.Replicas) != 2 || v.Owner != v.Replicas[0] || !strings.HasPrefix(v.Range, "(") {
			t.Errorf("vnode %s: got owner %q replicas %v range %q, want the owner first of 2 replicas", v.Vnode, v.Owner, v.Replicas, v.Range)
		}
		if i > 0 && v.OpsPerSec > res.Vnodes[i-1].OpsPerSec {
			t.Errorf("--sort ops: vnode %s (%.1f ops/s) after %s (%.1f)", v.Vnode, v.OpsPerSec, res.Vnodes[i-1].Vnode, res.Vnodes[i-1].OpsPerSec)
		}
	}
	if len(res.Vnodes) != 24 || writes != 120 || len(res.Nodes) != 3 {
		t.Errorf("got %d vnodes, %d writes from %v, want 24 vnodes, 120 writes from 3 nodes", len(res.Vnodes), writes, res.Nodes)
	}
	if !strings.Contains(out, `"slowest_replica": ""`) || !strings.Contains(out, `"read_p99_ms": null`) {
		t.Errorf("json: want slowest_replica empty and read_p99_ms null (no reads), got\n%.600s", out)
	}

	out, _, err = execute(t, addr, "--node", c.Config(2).ID)
	if err != nil {
		t.Fatalf("vnodes --node: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || len(lines) >= 25 || !strings.Contains(out, "–") {
		t.Errorf("--node %s: got %d lines, want fewer than every vnode, and – for too few samples:\n%s", c.Config(2).ID, len(lines), out)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, c.Config(2).ID) {
			t.Errorf("--node %s: got a vnode it does not replicate: %s", c.Config(2).ID, l)
		}
	}

	_, _, err = execute(t, addr, "--node", "nope")
	if err == nil || cli.ExitCode(err) != 2 || strings.Count(err.Error(), "\n") > 0 || !strings.Contains(err.Error(), `--node "nope": not in the ring`) {
		t.Errorf("--node nope: got %v (exit %d), want one line naming the node, exit 2", err, cli.ExitCode(err))
	}
}
