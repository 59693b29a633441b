package demo

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"ringkv/ctl/cli"
	"ringkv/node"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		args         []string
		wantHeadless bool
		wantNodes    int
		wantErr      bool
	}{
		{args: nil, wantNodes: 3},
		{args: []string{"--headless"}, wantHeadless: true, wantNodes: 3},
		{args: []string{"--nodes", "5"}, wantNodes: 5},
		{args: []string{"--nodes", "0"}, wantErr: true},
		{args: []string{"--replicas", "0"}, wantErr: true},
		{args: []string{"--keys", "-1"}, wantErr: true},
		{args: []string{"--rate", "-5"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ios, _, _, _ := cli.Test()
			var got *Options
			cmd := NewCmdDemo(cli.NewFactory(ios), func(o *Options) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			err := cmd.Execute()
			if tt.wantErr {
				if cli.ExitCode(err) != cli.ExitUsage {
					t.Errorf("got %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("execute: %v", err)
			}
			if got.Headless != tt.wantHeadless || got.Nodes != tt.wantNodes {
				t.Errorf("got headless=%v nodes=%d, want %v %d", got.Headless, got.Nodes, tt.wantHeadless, tt.wantNodes)
			}
		})
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	ios, _, out, errOut := cli.Test()
	ctx, cancel := context.WithCancel(context.Background())
	var dir string
	o := &Options{IO: ios, Headless: false, Nodes: 3, Replicas: 3, Ready: func(c *node.LocalCluster) {
		defer cancel()
		dir = c.Config(0).DataDir
		resp, err := http.Get("http://" + c.Node(1).Addrs().HTTP + "/v0/status")
		if err != nil {
			t.Errorf("status: %v", err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("got status %d, want 200", resp.StatusCode)
		}
	}}
	if err := Run(ctx, o); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{"n1", "n2", "n3", "curl -X PUT"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut.String(), "headless") {
		t.Errorf("stderr %q: want the note that it serves headless without a terminal", errOut)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data dir %s still exists (err %v), want it removed", dir, err)
	}
}

// TestHintFits: the hint bar explains the demo in one line of an 80-column terminal.
func TestHintFits(t *testing.T) {
	for _, o := range []struct{ nodes, keys, rate int }{
		{3, DefaultKeys, DefaultRate},
		{16, 12345, 100_000},
		{3, 0, 0},
	} {
		if h := hint(o.nodes, o.keys, o.rate); utf8.RuneCountInString(h) > 80 {
			t.Errorf("hint %q: got %d columns, want at most 80", h, utf8.RuneCountInString(h))
		}
	}
}
