package status

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"ringkv/ctl/cli"
	"ringkv/node"
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
				Epoch string `json:"epoch"`
				Nodes []struct {
					ID, State string
				} `json:"nodes"`
			}
			if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
				t.Fatalf("json: %v\n%s", err, out)
			}
			states := map[string]string{}
			for _, n := range resp.Nodes {
				states[n.ID] = n.State
			}
			if resp.Epoch != "1" || states["n1"] != "UP" || states["n2"] != "UP" || states["n3"] != "DOWN" {
				t.Errorf("got epoch %s states %v, want epoch 1, n1 n2 UP, n3 DOWN", resp.Epoch, states)
			}
			continue
		}
		if !strings.Contains(out.String(), "2/3 nodes answering") || !strings.Contains(out.String(), "DOWN") {
			t.Errorf("table:\n%s\nwant 2/3 answering and a DOWN row", out)
		}
	}
}
