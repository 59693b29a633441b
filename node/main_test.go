package node

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMainBadFlags(t *testing.T) {
	tests := []struct {
		args     []string
		wantFlag string
	}{
		{[]string{"--replicas", "x"}, "replicas"},
		{[]string{"--replicas", "0", "--id", "a"}, "--replicas"},
		{[]string{"--vnodes", "0", "--id", "a"}, "--vnodes"},
		{[]string{"--peers", "a"}, "peers"},
		{[]string{"--peers", "a=127.0.0.1:1,a=127.0.0.1:2", "--id", "a"}, "--peers"},
		{[]string{"--peers", "b=127.0.0.1:1", "--id", "a"}, "--peers"},
		{[]string{"--http", "nowhere", "--id", "a"}, "--http"},
		{[]string{"--replica-timeout", "0s", "--id", "a"}, "--replica-timeout"},
		{[]string{"--move-latency-target", "-1ms", "--id", "a"}, "move-latency-target"},
		{[]string{"--move-latency-target", "soon", "--id", "a"}, "move-latency-target"},
		{[]string{"--max-value-size", "lots"}, "max-value-size"},
		{[]string{"--advertise", "n1", "--id", "a"}, "--advertise"},
		{[]string{"--advertise", "n1:0", "--id", "a"}, "--advertise"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"--id", "a", "stray"}, "stray"},
		{[]string{"--id", "a", "--log-format", "xml"}, "--log-format"},
		{[]string{"--id", "a", "--max-hint-window", "-1h"}, "--max-hint-window"},
		{[]string{"--id", "a", "--max-hint-window", "0"}, "--tombstone-grace"},
		{[]string{"--id", "a", "--tombstone-grace", "2h"}, "--max-hint-window"},
		{[]string{"--max-hint-bytes", "lots"}, "max-hint-bytes"},
		{[]string{"--hint-rate", "-1"}, "hint-rate"},
		{[]string{"--stamp-cache", "lots"}, "stamp-cache"},
		{[]string{"--id", "a", "--value-threshold", "0"}, "--value-threshold"},
		{[]string{"--id", "a", "--value-threshold", "2M"}, "--value-threshold"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stderr); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			out := stderr.String()
			if strings.Count(out, "\n") != 1 || !strings.Contains(out, tt.wantFlag) {
				t.Errorf("stderr %q: want one line naming %s", out, tt.wantFlag)
			}
		})
	}
}

// TestMainVersion: kvnode --version prints its build on one line and exits 0 without starting.
func TestMainVersion(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &stderr); code != 0 {
		t.Errorf("got exit code %d, want 0", code)
	}
	if out := stderr.String(); !strings.HasPrefix(out, "kvnode ") || strings.Count(out, "\n") != 1 || !strings.Contains(out, "go1.") {
		t.Errorf("got %q, want one line \"kvnode VERSION (..., goX)\"", out)
	}
}

func TestFlagsFillConfig(t *testing.T) {
	cfg := DefaultConfig()
	fs := cfg.FlagSet("kvnode")
	err := fs.Parse([]string{"--grpc", "0.0.0.0:9191", "--advertise", "127.0.0.1:9191", "--certs-dir", "certs", "--peers", "a=127.0.0.1:9191,b=127.0.0.1:9292",
		"--replicas", "2", "--vnodes", "128", "--sync-writes", "--replica-timeout", "250ms", "--max-value-size", "2MiB",
		"--move-latency-target", "8ms", "--max-hint-bytes", "1GiB", "--max-hint-window", "30m", "--hint-rate", "1MiB",
		"--stamp-cache", "8MiB", "--value-threshold", "1K"})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	got, err := cfg.complete()
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	if got.ID != "a" || got.DataDir != "data/a" || got.Replicas != 2 || got.VNodes != 128 || !got.SyncWrites ||
		got.ReplicaTimeout != 250*time.Millisecond || got.MaxValueSize != 2<<20 || len(got.Peers) != 2 ||
		got.MoveLatencyTarget != 8*time.Millisecond || got.Advertise != "127.0.0.1:9191" || got.CertsDir != "certs" ||
		got.MaxHintBytes != 1<<30 || got.MaxHintWindow != 30*time.Minute || got.HintRate != 1<<20 || got.StampCache != 8<<20 ||
		got.ValueThreshold != 1<<10 {
		t.Errorf("got %+v", got)
	}
}

// TestMoveLatencyTargetFlag: the latency pace of ring changes is on by default (auto: twice
// the p99 before the streams began); off turns it off; a duration sets the target.
func TestMoveLatencyTargetFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 0},
		{[]string{"--move-latency-target", "auto"}, 0},
		{[]string{"--move-latency-target", "off"}, MovePaceOff},
		{[]string{"--move-latency-target", "6ms"}, 6 * time.Millisecond},
	} {
		cfg := DefaultConfig()
		if err := cfg.FlagSet("kvnode").Parse(append([]string{"--id", "a"}, tc.args...)); err != nil {
			t.Fatalf("%v: parse: %v", tc.args, err)
		}
		got, err := cfg.complete()
		if err != nil {
			t.Fatalf("%v: complete: %v", tc.args, err)
		}
		if got.MoveLatencyTarget != tc.want {
			t.Errorf("%v: got %v, want %v", tc.args, got.MoveLatencyTarget, tc.want)
		}
	}
}

func TestDefaultsMatchSpec(t *testing.T) {
	c := DefaultConfig()
	if c.HTTPAddr != "127.0.0.1:8080" || c.GRPCAddr != "127.0.0.1:9090" || c.AdminAddr != "127.0.0.1:7070" ||
		c.Replicas != 3 || c.VNodes < 64 || c.MaxValueSize != 1<<20 || c.MaxHintWindow != 3*time.Hour {
		t.Errorf("got %+v, want SPEC.md's defaults", c)
	}
}

// TestMainKeepsMutexWaitsTimed: the kvnode binary (Main -> run) switches the background mutex
// sampling on, so a mutex profile of a real kvnode sees contention older than the capture.
// Before, only Start (tests, the demo) did.
func TestMainKeepsMutexWaitsTimed(t *testing.T) {
	prev := runtime.SetMutexProfileFraction(0)
	t.Cleanup(func() { runtime.SetMutexProfileFraction(prev) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve nothing: New, then Run drains at once
	var stderr bytes.Buffer
	args := []string{"--id", "a", "--in-memory", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--admin", "127.0.0.1:0"}
	if code := run(ctx, args, &stderr); code != 0 {
		t.Fatalf("run = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	if got := runtime.SetMutexProfileFraction(-1); got == 0 {
		t.Errorf("mutex profile fraction after kvnode's run = %d, want sampling on", got)
	}
}

// TestMainLogFormatJSON: --log-format json writes every log line as a JSON object.
func TestMainLogFormatJSON(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve nothing: New, then Run drains at once
	var stderr bytes.Buffer
	args := []string{"--id", "a", "--in-memory", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-format", "json"}
	if code := run(ctx, args, &stderr); code != 0 {
		t.Fatalf("run = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("got line %q, want JSON", l)
		}
	}
	if len(lines) == 0 || !strings.Contains(stderr.String(), `"level":"INFO"`) {
		t.Errorf("got %q, want JSON log lines", stderr.String())
	}
}
