package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"go.uber.org/goleak"

	"ringkv/internal/leaktest"

	"ringkv/ctl/cli"
	"ringkv/internal/clustertest"
	"ringkv/loadgen"
	"ringkv/node"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaktest.NodeLibraries...)
}

func TestNewCmdBenchFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error
		check   func(t *testing.T, o *Options)
	}{
		{name: "defaults", args: nil, check: func(t *testing.T, o *Options) {
			if o.Config.Rate != 1000 || o.Config.Workload != (loadgen.Mix{Get: 1}) || o.Target != "grpc" {
				t.Errorf("got rate %g workload %v target %s, want 1000 get grpc", o.Config.Rate, o.Config.Workload, o.Target)
			}
		}},
		{name: "everything", args: []string{"--rate", "5000", "-c", "32", "--duration", "3s", "--warmup", "0s",
			"--workload", "mixed:get=90,put=10", "--keys", "500", "--key-dist", "zipf:1.2", "--value-size", "10-20",
			"--ack", "1", "--from", "3", "--target", "http", "--by-node", "--latency"},
			check: func(t *testing.T, o *Options) {
				c := o.Config
				if c.Rate != 5000 || c.Connections != 32 || c.Duration != 3*time.Second || c.Warmup != 0 ||
					c.Workload != (loadgen.Mix{Get: 90, Put: 10}) || c.Keys != 500 || c.KeyDist.S != 1.2 ||
					c.ValueSize != (loadgen.Size{Min: 10, Max: 20}) || o.Ack != 1 || o.From != 3 || !o.ByNode {
					t.Errorf("got %+v, ack %d from %d by-node %t; want the flags", c, o.Ack, o.From, o.ByNode)
				}
			}},
		{name: "find-max", args: []string{"--find-max", "--slo", "p99=5ms,max=100ms", "--step", "3s"}, check: func(t *testing.T, o *Options) {
			if len(o.slo) != 2 || o.FindMaxC.Step != 3*time.Second {
				t.Errorf("got slo %v step %s, want 2 objectives, 3s", o.slo, o.FindMaxC.Step)
			}
		}},
		{name: "closed loop", args: []string{"--rate", "0"}},
		{name: "spin", args: []string{"--target", "http", "--rate", "0", "--spin", "50us"}, check: func(t *testing.T, o *Options) {
			if o.Config.Spin != 50*time.Microsecond {
				t.Errorf("got spin %s, want 50µs", o.Config.Spin)
			}
		}},
		{name: "spin over grpc", args: []string{"--rate", "0", "--spin", "50us"}, wantErr: cli.ErrUsage},
		{name: "spin at a rate", args: []string{"--target", "http", "--spin", "50us"}, wantErr: cli.ErrUsage},
		{name: "profiles", args: []string{"--profile", "cpu,mutex", "--profile-dir", "prof"}, check: func(t *testing.T, o *Options) {
			if !slices.Equal(o.Profile, []string{"cpu", "mutex"}) || o.ProfileDir != "prof" {
				t.Errorf("got profile %v dir %q, want [cpu mutex] prof", o.Profile, o.ProfileDir)
			}
		}},
		{name: "bad profile", args: []string{"--profile", "flame"}, wantErr: cli.ErrUsage},
		{name: "profile with find-max", args: []string{"--profile", "cpu", "--find-max"}, wantErr: cli.ErrUsage},
		{name: "bad workload", args: []string{"--workload", "scan"}, wantErr: cli.ErrUsage},
		{name: "bad dist", args: []string{"--key-dist", "zipf:0.5"}, wantErr: cli.ErrUsage},
		{name: "bad size", args: []string{"--value-size", "9-1"}, wantErr: cli.ErrUsage},
		{name: "bad target", args: []string{"--target", "redis"}, wantErr: cli.ErrUsage},
		{name: "ack over from", args: []string{"--ack", "3", "--from", "2"}, wantErr: cli.ErrUsage},
		{name: "negative rate", args: []string{"--rate", "-1"}, wantErr: cli.ErrUsage},
		{name: "bad slo", args: []string{"--find-max", "--slo", "p99"}, wantErr: cli.ErrUsage},
		{name: "find-max with rate", args: []string{"--find-max", "--rate", "5"}, wantErr: cli.ErrUsage},
		{name: "max errors default", args: nil, check: func(t *testing.T, o *Options) {
			if o.Config.MaxErrors != 0.01 {
				t.Errorf("got max errors %g, want 0.01 (1%%)", o.Config.MaxErrors)
			}
		}},
		{name: "max errors", args: []string{"--max-errors", "5"}, check: func(t *testing.T, o *Options) {
			if o.Config.MaxErrors != 0.05 {
				t.Errorf("got max errors %g, want 0.05", o.Config.MaxErrors)
			}
		}},
		{name: "max errors over 100", args: []string{"--max-errors", "101"}, wantErr: cli.ErrUsage},
		{name: "events by default", args: nil, check: func(t *testing.T, o *Options) {
			if !o.Events || o.Chart {
				t.Errorf("got events %t chart %t, want events on, chart off", o.Events, o.Chart)
			}
		}},
		{name: "chart with json", args: []string{"--chart", "--json"}, wantErr: cli.ErrUsage},
		{name: "chart with find-max", args: []string{"--chart", "--find-max"}, wantErr: cli.ErrUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cli.Test()
			var got *Options
			cmd := NewCmdBench(cli.NewFactory(ios), func(o *Options) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if err == nil && tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// run executes kvctl bench with args against f and returns stdout.
func run(t *testing.T, f *cli.Factory, out *bytes.Buffer, args ...string) string {
	t.Helper()
	out.Reset()
	cmd := NewCmdBench(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("kvctl bench %s: %v", strings.Join(args, " "), err)
	}
	return out.String()
}

// TestBenchCluster fills a real 3-node cluster, benches it over HTTP and gRPC with a per-node
// breakdown, and diffs the two JSON results.
func TestBenchCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	base := node.DefaultConfig()
	base.InMemory, base.Replicas, base.VNodes = true, 3, 16
	c := clustertest.Start(t, 3, base)
	ios, _, out, errOut := cli.Test()
	f := cli.NewFactory(ios)
	f.Addr = c.Node(0).Addrs().GRPC
	t.Cleanup(f.Close)

	got := run(t, f, out, "fill", "--keys", "300", "-c", "8")
	if !strings.Contains(got, "filled 300 keys") {
		t.Errorf("fill printed %q, want it to report 300 keys", got)
	}

	dir := t.TempDir()
	files := map[string]string{}
	for _, target := range []string{"http", "grpc"} {
		// --max-lag 10s: this test is about the plumbing; a starved test machine may fall behind.
		js := run(t, f, out, "--target", target, "--rate", "300", "--duration", "1s", "--warmup", "0s", "--max-lag", "10s",
			"-c", "8", "--keys", "300", "--workload", "mixed:get=80,put=20", "--by-node", "--json", "--quiet")
		var rep loadgen.Report
		if err := json.Unmarshal([]byte(js), &rep); err != nil {
			t.Fatalf("%s: decode --json: %v\n%s", target, err, js)
		}
		var errs int64
		for _, n := range rep.Errors {
			errs += n
		}
		if rep.Requests+rep.Unsent != 300 || rep.Requests == 0 || errs != 0 || rep.NotFound != 0 {
			t.Errorf("%s: got %d requests + %d unsent, %d errors, %d not found; want 300 in all, 0, 0",
				target, rep.Requests, rep.Unsent, errs, rep.NotFound)
		}
		nodes := map[string]bool{}
		for _, b := range rep.Breakdown {
			nodes[b.Node] = true
		}
		if len(nodes) != 3 {
			t.Errorf("%s: breakdown by node covers %v, want n1, n2, n3", target, nodes)
		}
		files[target] = filepath.Join(dir, target+".json")
		if err := os.WriteFile(files[target], []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// --profile: every process profiles during the measured phase; files named after the
	// run. The three in-process nodes are one process: one file per kind.
	pdir := t.TempDir()
	run(t, f, out, "--rate", "200", "--duration", "1s", "--warmup", "0s", "--max-lag", "10s", "-c", "4",
		"--keys", "300", "--quiet", "--profile", "heap,mutex", "--profile-dir", pdir)
	profs, _ := filepath.Glob(filepath.Join(pdir, "bench-*.pb.gz"))
	if len(profs) != 2 {
		t.Errorf("--profile heap,mutex on 3 nodes of one process wrote %v, want 2 bench-*.pb.gz files", profs)
	}
	for _, p := range profs {
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := profile.Parse(fh); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		fh.Close()
	}

	// --chart: on a terminal, the chart fitted to its width; piped, one line on stderr and
	// the series as plain lines.
	got = run(t, f, out, "--rate", "200", "--duration", "3s", "--warmup", "0s", "--max-lag", "10s", "-c", "4",
		"--keys", "300", "--quiet", "--chart")
	if !strings.Contains(got, "at_s\trate\tp99_ms") || !strings.Contains(errOut.String(), "stdout is not a terminal") {
		t.Errorf("--chart piped: want the plain series and a line on stderr; stdout:\n%s\nstderr:\n%s", got, errOut)
	}
	ios.OutTTY, ios.OutWidth = true, func() int { return 90 }
	got = run(t, f, out, "--rate", "200", "--duration", "3s", "--warmup", "0s", "--max-lag", "10s", "-c", "4",
		"--keys", "300", "--quiet", "--chart")
	ios.OutTTY, ios.OutWidth = false, nil
	if !strings.Contains(got, "p99 (ms) per second") || !strings.Contains(got, "Phases:") {
		t.Errorf("--chart on a terminal: want phases and the chart:\n%s", got)
	}
	for _, l := range strings.Split(got[strings.Index(got, "p99 (ms) per second"):], "\n") {
		if n := len([]rune(l)); n > 90 {
			t.Errorf("chart line of %d columns on a 90-column terminal: %q", n, l)
		}
	}

	got = run(t, f, out, "diff", files["http"], files["grpc"])
	for _, want := range []string{"rate achieved", "p99", "max"} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
}

// TestBenchDeadCluster: a bench against an address nobody listens on fails (exit 1), leads
// with a success ratio of 0% and prints no ladder of latencies made of refused connections.
func TestBenchDeadCluster(t *testing.T) {
	ios, _, out, errOut := cli.Test()
	f := cli.NewFactory(ios)
	f.Addr = "127.0.0.1:1"
	t.Cleanup(f.Close)
	cmd := NewCmdBench(f, nil)
	cmd.SetArgs([]string{"--rate", "100", "--duration", "1s", "--warmup", "0s", "--quiet", "-c", "2"})
	// Events stay on: the node's refusal of admin calls is one line on stderr, not a failure.
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.ExecuteContext(context.Background())
	if !errors.Is(err, ErrInvalidResult) || cli.ExitCode(err) != cli.ExitFailure {
		t.Errorf("got error %v (exit %d), want %v (exit %d)", err, cli.ExitCode(err), ErrInvalidResult, cli.ExitFailure)
	}
	got := out.String()
	if line := errOut.String(); !strings.Contains(line, "bench: not following the cluster, no events or phases: ") {
		t.Errorf("stderr lacks the line saying events are off:\n%s", line)
	}
	for _, want := range []string{"Success ratio: 0.00%", "INVALID RESULT", "no request succeeded"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "50.000%") {
		t.Errorf("summary holds a latency ladder:\n%s", got)
	}
}
