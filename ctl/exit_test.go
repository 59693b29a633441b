package ctl

import (
	"context"
	"strings"
	"testing"

	"ringkv/ctl/cli"
	"ringkv/node"
)

// startNode starts a one-node cluster for the test and returns its gRPC address.
func startNode(t *testing.T) string {
	t.Helper()
	base := node.DefaultConfig()
	base.Replicas, base.VNodes = 1, 8
	c, err := node.StartLocalCluster(context.Background(), 1, base, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Node(0).Addrs().GRPC
}

// TestExitCodes runs kvctl's command tree against a real node: what the node rejects as
// invalid exits as a usage error from every command, not only from `ring`.
func TestExitCodes(t *testing.T) {
	addr := startNode(t)
	long := strings.Repeat("k", 64<<10)
	tests := []struct {
		name string
		args []string
		want int
	}{
		{name: "put", args: []string{"put", "k", "v"}, want: cli.ExitOK},
		{name: "get", args: []string{"get", "k"}, want: cli.ExitOK},
		{name: "get missing", args: []string{"get", "missing"}, want: cli.ExitNotFound},
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

// TestRunErrors runs kvctl as main does: a bad command or argument count exits 2 with a line
// that names what is wanted; get of a missing key says "not found" once and exits 4, apart
// from a node that cannot be reached (1).
func TestRunErrors(t *testing.T) {
	addr := startNode(t)
	tests := []struct {
		args     []string
		wantExit int
		wantErr  string // stderr, whole
	}{
		{[]string{"gett", "k"}, cli.ExitUsage, `kvctl: usage: unknown command "gett" for "kvctl"; did you mean cert or get or heat? (kvctl --help lists them)`},
		{[]string{"ring", "remov", "n1"}, cli.ExitUsage, `kvctl: usage: unknown command "remov" for "kvctl ring"; did you mean remove? (kvctl ring --help lists them)`},
		{[]string{"repair", "statu"}, cli.ExitUsage, `kvctl: usage: unknown command "statu" for "kvctl repair"; did you mean status? (kvctl repair --help lists them)`},
		{[]string{"repair", "--vnode", "zz"}, cli.ExitUsage, `kvctl: usage: --vnode: vnode "zz": want a token in hex, as kvctl ring show prints it (e.g. 1c71c71c71c71c71)`},
		{[]string{"put", "k"}, cli.ExitUsage, "kvctl: usage: kvctl put takes KEY VALUE: got 1 argument"},
		{[]string{"status", "x"}, cli.ExitUsage, "kvctl: usage: kvctl status takes no arguments: got 1 argument"},
		{[]string{"--addr", addr, "get", "missing"}, cli.ExitNotFound, `kvctl: not found: key "missing"`},
		{[]string{"--addr", "127.0.0.1:1", "get", "k", "--timeout", "2s"}, cli.ExitFailure, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ios, _, _, errOut := cli.Test()
			if got := Run(context.Background(), ios, tt.args); got != tt.wantExit {
				t.Errorf("got exit %d (%s), want %d", got, errOut, tt.wantExit)
			}
			if got := strings.TrimSpace(errOut.String()); tt.wantErr != "" && got != tt.wantErr {
				t.Errorf("got stderr %q, want %q", got, tt.wantErr)
			}
		})
	}
}
