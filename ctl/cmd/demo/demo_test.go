package demo

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"ringkv/ctl/cli"
	"ringkv/loadgen"
	"ringkv/node"
	"ringkv/proto/kvpb"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		args         []string
		wantHeadless bool
		wantNodes    int
		wantSpares   int
		wantRate     uint64
		wantErr      bool
	}{
		{args: nil, wantNodes: 3, wantSpares: 2},
		{args: []string{"--headless"}, wantHeadless: true, wantNodes: 3, wantSpares: 2},
		{args: []string{"--nodes", "5"}, wantNodes: 5, wantSpares: 2},
		{args: []string{"--spares", "0"}, wantNodes: 3, wantSpares: 0},
		{args: []string{"--spares", "-1"}, wantErr: true},
		{args: []string{"--nodes", "15", "--spares", "2"}, wantErr: true},
		{args: []string{"--nodes", "0"}, wantErr: true},
		{args: []string{"--replicas", "0"}, wantErr: true},
		{args: []string{"--keys", "-1"}, wantErr: true},
		{args: []string{"--rate", "-5"}, wantErr: true},
		{args: []string{"--change-rate", "0.5"}, wantNodes: 3, wantSpares: 2, wantRate: 512 << 10},
		{args: []string{"--change-rate", "0"}, wantErr: true},
		{args: []string{"--change-rate", "fast"}, wantErr: true},
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
			if got.Headless != tt.wantHeadless || got.Nodes != tt.wantNodes || got.Spares != tt.wantSpares || got.ChangeRate != tt.wantRate {
				t.Errorf("got headless=%v nodes=%d spares=%d change rate=%d, want %v %d %d %d", got.Headless, got.Nodes, got.Spares, got.ChangeRate,
					tt.wantHeadless, tt.wantNodes, tt.wantSpares, tt.wantRate)
			}
		})
	}
}

// stopWatch records, when the demo says it stopped, whether its data directory still exists.
type stopWatch struct {
	bytes.Buffer
	dir       *string
	said      bool
	dirExists bool
}

func (w *stopWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("kvctl demo: stopped")) {
		_, err := os.Stat(filepath.Dir(*w.dir))
		w.said, w.dirExists = true, err == nil
	}
	return w.Buffer.Write(p)
}

// TestRunServesUntilCancelled: the demo founds its cluster, every founder serves, the spares
// await admission and are listed with the command that adds one, and the data goes when it
// stops — with three founders and two spares, and with eight founders (more than raft
// voters: the others found the group as non-voters).
func TestRunServesUntilCancelled(t *testing.T) {
	for _, tc := range []struct{ nodes, spares int }{{3, 2}, {8, 0}} {
		t.Run(fmt.Sprintf("nodes=%d,spares=%d", tc.nodes, tc.spares), func(t *testing.T) { runServesUntilCancelled(t, tc.nodes, tc.spares) })
	}
}

func runServesUntilCancelled(t *testing.T, nodes, spares int) {
	ios, _, out, _ := cli.Test()
	ctx, cancel := context.WithCancel(context.Background())
	var dir string
	errOut := &stopWatch{dir: &dir}
	ios.ErrOut = errOut
	o := &Options{IO: ios, Headless: false, Nodes: nodes, Spares: spares, Replicas: 3, Ready: func(c *node.LocalCluster) {
		defer cancel()
		dir = c.Config(0).DataDir
		if c.Len() != nodes+spares {
			t.Errorf("got %d nodes, want %d founders and %d spares", c.Len(), nodes, spares)
		}
		for i := range c.Len() {
			resp, err := http.Get("http://" + c.Node(i).Addrs().HTTP + "/v0/status")
			if err != nil {
				t.Errorf("status of %s: %v", c.Node(i).ID(), err)
				continue
			}
			resp.Body.Close()
			want := http.StatusOK
			if i >= nodes {
				want = http.StatusServiceUnavailable // a spare awaits admission
			}
			if resp.StatusCode != want {
				t.Errorf("%s: got status %d, want %d", c.Node(i).ID(), resp.StatusCode, want)
			}
		}
	}}
	if err := Run(ctx, o); err != nil {
		t.Fatalf("run: %v", err)
	}
	wants := []string{"n1", fmt.Sprintf("n%d", nodes), "curl -X PUT"}
	if spares > 0 {
		wants = append(wants, fmt.Sprintf("n%d", nodes+spares), "spare, awaiting admission", fmt.Sprintf("ring add n%d=127.0.0.1:", nodes+1))
	} else if strings.Contains(out.String(), "ring add") {
		t.Errorf("output names an add without spares:\n%s", out)
	}
	for _, want := range wants {
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
	// Clean up before printing: a reader gone with Ctrl-C must not leave the data behind.
	if !errOut.said || errOut.dirExists {
		t.Errorf("got said stopped %t with the data dir there %t, want it said after the removal:\n%s", errOut.said, errOut.dirExists, errOut.String())
	}
}

// TestHintFits: the hint bar explains the demo in one line of an 80-column terminal, and
// states no count of nodes that a drain would make wrong (the console's title counts them).
func TestHintFits(t *testing.T) {
	for _, o := range []struct{ keys, rate int }{
		{DefaultKeys, DefaultRate},
		{12345, 100_000},
		{0, 0},
	} {
		h := hint(o.keys, o.rate)
		if utf8.RuneCountInString(h) > 80 {
			t.Errorf("hint %q: got %d columns, want at most 80", h, utf8.RuneCountInString(h))
		}
		if strings.ContainsAny(h, "0123456789") && strings.Contains(h, " nodes") {
			t.Errorf("hint %q: got a node count, want none (it goes stale after a drain)", h)
		}
	}
}

func TestFillResultLine(t *testing.T) {
	tests := []struct {
		r          fillResult
		wantLine   string
		wantFailed bool
	}{
		{
			r:        fillResult{Keys: 20000, Wanted: 20000, Elapsed: 2 * time.Second, Errors: map[loadgen.Kind]int64{}},
			wantLine: "filled 20000 of 20000 keys in 2s (10000 keys/s, 0 errors)",
		},
		{
			r: fillResult{Keys: 9000, Wanted: 20000, Elapsed: 3 * time.Second, TimeBudget: true,
				Errors: map[loadgen.Kind]int64{loadgen.KindTimeout: 3}},
			wantLine: "filled 8997 of 20000 keys in 3s (2999 keys/s, 3 errors: timeout 3; stopped at the 3s budget)",
		},
		{
			r: fillResult{Keys: 4000, Wanted: 20000, Elapsed: time.Second, ErrorBudget: true,
				Errors: map[loadgen.Kind]int64{loadgen.KindUnavailable: 1200, loadgen.KindTimeout: 34}},
			wantLine:   "filled 2766 of 20000 keys in 1s (2766 keys/s, 1234 errors: timeout 34, unavailable 1200; stopped: too many errors)",
			wantFailed: true,
		},
		{
			// Over 5% of the writes failed, though under the absolute budget.
			r:          fillResult{Keys: 400, Wanted: 400, Elapsed: time.Second, Errors: map[loadgen.Kind]int64{loadgen.KindOther: 40}},
			wantLine:   "filled 360 of 400 keys in 1s (360 keys/s, 40 errors: other 40)",
			wantFailed: true,
		},
	}
	for _, tt := range tests {
		if got := tt.r.Line(); got != tt.wantLine {
			t.Errorf("got line %q, want %q", got, tt.wantLine)
		}
		if got := tt.r.Failed(); got != tt.wantFailed {
			t.Errorf("%s: got failed %v, want %v", tt.wantLine, got, tt.wantFailed)
		}
	}
}

// TestFillStopsOnErrors fills through a node that does not listen: the fill stops at its error
// budget instead of its time budget, and says why.
func TestFillStopsOnErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ios, _, _, errOut := cli.Test()
	f := &cli.Factory{IO: ios}
	defer f.Close()
	kv, err := f.KV(addr)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fill(t.Context(), &Options{IO: ios, Keys: 100_000}, []kvpb.KVClient{kv})
	if err != nil {
		t.Fatalf("fill: %v", err)
	}
	if !r.ErrorBudget || !r.Failed() || r.Errors[loadgen.KindConnection] == 0 {
		t.Errorf("got %s (errors %v), want it stopped by connection errors", r.Line(), r.Errors)
	}
	if !strings.Contains(errOut.String(), "stopped: too many errors") || !strings.Contains(errOut.String(), "first error: connection") {
		t.Errorf("stderr %q: want the summary and the first error", errOut)
	}
}

// TestHealth names the node that does not answer.
func TestHealth(t *testing.T) {
	base := node.DefaultConfig()
	base.VNodes = 8
	c, err := node.StartLocalCluster(t.Context(), 3, base, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	defer c.Close()
	ios, _, _, _ := cli.Test()
	f := &cli.Factory{IO: ios}
	defer f.Close()
	admin, err := f.Admin(c.Node(0).Addrs().GRPC)
	if err != nil {
		t.Fatal(err)
	}
	if got := health(t.Context(), admin); got != "" {
		t.Errorf("all up: got %q, want no warning", got)
	}
	if err := c.Stop(2); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if got := health(t.Context(), admin); got != "n3 not answering" {
		t.Errorf("n3 stopped: got %q, want %q", got, "n3 not answering")
	}
}
