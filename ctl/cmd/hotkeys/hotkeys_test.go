package hotkeys

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
		{[]string{"--window", "1m", "-k", "3", "--node", "n1", "--reveal"}, true},
		{[]string{"--window", "30s"}, false},
		{[]string{"-k", "0"}, false},
		{[]string{"--vnode", "x"}, false},
		{[]string{"--node", "n1", "--all"}, false},
		{[]string{"extra"}, false},
	} {
		ios, _, _, _ := cli.Test()
		cmd := NewCmdHotKeys(cli.NewFactory(ios), func(*Options) error { return nil })
		cmd.SetArgs(tc.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		if (err == nil) != tc.ok {
			t.Errorf("%v: got error %v, want ok %v", tc.args, err, tc.ok)
		}
	}
}

func execute(t *testing.T, addr string, args ...string) (string, string, error) {
	t.Helper()
	return cli.RunAt(context.Background(), addr, func(f *cli.Factory) *cobra.Command { return NewCmdHotKeys(f, nil) }, args...)
}

// TestHotKeysOfCluster: keys coordinated by two nodes of a real 3-node cluster are merged;
// the hot key comes first with its rates, its share of its vnode and its replicas.
func TestHotKeysOfCluster(t *testing.T) {
	clk := testclock.New(time.Now().Truncate(time.Minute))
	base := node.DefaultConfig()
	base.VNodes = 8
	base.Now = clk.Now
	c := clustertest.Start(t, 3, base)
	ctx := context.Background()
	binKey := []byte{0, 1, 2, 0xff}
	for i := range 2 {
		conn, err := cli.NewFactory(&cli.IOStreams{}).KV(c.Node(i).Addrs().GRPC)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 30 {
			keys := [][]byte{[]byte("hot"), []byte(fmt.Sprintf("cold-%d-%d", i, j))}
			if j%3 == 0 {
				keys = append(keys, binKey)
			}
			for _, k := range keys {
				if _, err := conn.Put(ctx, &kvpb.PutRequest{Key: k, Value: []byte("0123456789")}); err != nil {
					t.Fatalf("put: %v", err)
				}
			}
		}
		if _, err := conn.Get(ctx, &kvpb.GetRequest{Key: []byte("hot")}); err != nil {
			t.Fatalf("get: %v", err)
		}
	}
	clk.Advance(10 * time.Second)
	addr := c.Node(0).Addrs().GRPC

	out, _, err := execute(t, addr, "-o", "json", "-k", "3")
	if err != nil {
		t.Fatalf("hotkeys: %v", err)
	}
	var res struct {
		Nodes []string `json:"nodes"`
		Keys  []struct {
			Key          string   `json:"key"`
			Truncated    bool     `json:"truncated"`
			ReadsPerSec  float64  `json:"reads_per_sec"`
			WritesPerSec float64  `json:"writes_per_sec"`
			ShareOfVnode float64  `json:"share_of_vnode"`
			Error        *uint64  `json:"error"`
			Vnode        string   `json:"vnode"`
			Replicas     []string `json:"replicas"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(res.Nodes) != 3 || len(res.Keys) != 3 {
		t.Fatalf("got nodes %v and %d keys, want 3 and 3:\n%s", res.Nodes, len(res.Keys), out)
	}
	hot := res.Keys[0]
	if hot.Key != "hot" || hot.WritesPerSec != 6 || hot.ReadsPerSec != 0.2 || hot.Error == nil || *hot.Error != 0 {
		t.Errorf("got first %+v, want hot at 6 writes/s, 0.2 reads/s, error 0", hot)
	}
	if hot.ShareOfVnode <= 0.3 || hot.ShareOfVnode > 1 || hot.Vnode == "" || len(hot.Replicas) != 3 {
		t.Errorf("got share of vnode %v, vnode %q, replicas %v: want a share over 0.3 of a vnode with 3 replicas", hot.ShareOfVnode, hot.Vnode, hot.Replicas)
	}
	if b := res.Keys[1]; !strings.HasPrefix(b.Key, "0x000102ff…~") || !b.Truncated {
		t.Errorf("got second %+v, want the binary key cut with a hash", b)
	}

	// --reveal and --vnode; the table.
	out, _, err = execute(t, addr, "--reveal", "--vnode", hot.Vnode, "--node", "n1")
	if err != nil || !strings.Contains(out, "hot") {
		t.Errorf("table of n1's keys of vnode %s: got %v\n%s", hot.Vnode, err, out)
	}
	out, _, err = execute(t, addr, "--reveal", "-o", "json")
	if err != nil || !strings.Contains(out, `"\"\\x00\\x01\\x02\\xff\""`) {
		t.Errorf("--reveal: got %v, want the binary key quoted:\n%s", err, out)
	}

	// Bad input: one line each, with its exit code.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--node", "n9"}, cli.ExitUsage, `--node "n9": not in the ring (nodes: n1, n2, n3)`},
		{[]string{"--vnode", "12345"}, cli.ExitUsage, "--vnode 12345: no vnode of the ring has this token"},
	} {
		_, _, err := execute(t, addr, tc.args...)
		if err == nil || cli.ExitCode(err) != tc.code || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: got %v (exit %d), want one line %q, exit %d", tc.args, err, cli.ExitCode(err), tc.want, tc.code)
		}
	}
	clk.Advance(10 * time.Second)
	_, _, err = execute(t, addr)
	if err == nil || cli.ExitCode(err) != cli.ExitNotFound || !strings.Contains(err.Error(), "no data for the last 10s") {
		t.Errorf("a quiet window: got %v (exit %d), want no data, exit %d", err, cli.ExitCode(err), cli.ExitNotFound)
	}
	// The minute still holds the burst.
	if out, _, err := execute(t, addr, "--window", "1m", "-k", "1"); err != nil || !strings.Contains(out, "hot") {
		t.Errorf("--window 1m: got %v\n%s", err, out)
	}
}
