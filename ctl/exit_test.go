package ctl

import (
	"context"
	"strings"
	"testing"

	"ringkv/ctl/cli"
	"ringkv/node"
)

// TestExitCodes runs kvctl's command tree against a real node: what the node rejects as
// invalid exits as a usage error from every command, not only from `ring`.
func TestExitCodes(t *testing.T) {
	base := node.DefaultConfig()
	base.Replicas, base.VNodes = 1, 8
	c, err := node.StartLocalCluster(context.Background(), 1, base, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	defer c.Close()
	addr := c.Node(0).Addrs().GRPC
	long := strings.Repeat("k", 64<<10)
	tests := []struct {
		name string
		args []string
		want int
	}{
		{name: "put", args: []string{"put", "k", "v"}, want: cli.ExitOK},
		{name: "get", args: []string{"get", "k"}, want: cli.ExitOK},
		{name: "get missing", args: []string{"get", "missing"}, want: cli.ExitFailure},
		{name: "get over-long key", args: []string{"get", long}, want: cli.ExitUsage},
		{name: "put over-long key", args: []string{"put", long, "v"}, want: cli.ExitUsage},
		{name: "del over-long key", args: []string{"del", long}, want: cli.ExitUsage},
		{name: "get from more than the replicas", args: []string{"get", "k", "--from", "2"}, want: cli.ExitUsage},
		{name: "ring add existing member", args: []string{"ring", "add", "n1=" + addr, "--yes"}, want: cli.ExitRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cli.Test()
			f := cli.NewFactory(ios)
			defer f.Close()
			root := NewRootCmd(f)
			root.SetArgs(append([]string{"--addr", addr}, tt.args...))
			err := root.ExecuteContext(context.Background())
			if got := cli.ExitCode(err); got != tt.want {
				t.Errorf("kvctl %s: got exit %d (%v), want %d", tt.args[0], got, err, tt.want)
			}
		})
	}
}
