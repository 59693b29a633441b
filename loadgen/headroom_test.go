package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"

	"ringkv/proto/kvpb"
)

// serveNoop makes the test binary a no-op server when LOADGEN_NOOP is grpc or http: it prints
// its address, serves until its stdin closes, and returns true. The headroom benchmarks run it
// as a child process so that the generator's CPU use is its own.
func serveNoop() bool {
	kind := os.Getenv("LOADGEN_NOOP")
	if kind == "" {
		return false
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(lis.Addr())
	switch kind {
	case "grpc":
		gs := grpc.NewServer()
		kvpb.RegisterKVServer(gs, &kvServer{})
		go gs.Serve(lis)
	default:
		go http.Serve(lis, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusOK)
		}))
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return true
}

// startNoopChild starts the no-op server of kind in a child process and returns its address.
func startNoopChild(b *testing.B, kind string) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOADGEN_NOOP="+kind)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return addr[:len(addr)-1]
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// BenchmarkHeadroom measures the generator's own ceiling: a closed-loop run (or an open-model
// run at LOADGEN_RATE, reporting the achieved fraction of it as of-asked) against a no-op
// server in a child process. Run with -benchtime=1x; LOADGEN_CONNS (16) and LOADGEN_SECONDS
// (5) tune it.
func BenchmarkHeadroom(b *testing.B) {
	for _, kind := range []string{"grpc", "http"} {
		b.Run(kind, func(b *testing.B) {
			addr := startNoopChild(b, kind)
			conns := envInt("LOADGEN_CONNS", 16)
			var tgt Target
			if kind == "grpc" {
				g, err := DialGRPCTarget(addr, conns, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer g.Close()
				tgt = g
			} else {
				h := NewHTTPTarget(addr, conns, 0, 0)
				defer h.Close()
				tgt = h
			}
			cfg := DefaultConfig()
			cfg.Rate = float64(envInt("LOADGEN_RATE", 0))
			cfg.Connections = conns
			cfg.Duration = time.Duration(envInt("LOADGEN_SECONDS", 5)) * time.Second
			cfg.Warmup = time.Second
			var r *Result
			for range b.N {
				var err error
				if r, err = Run(context.Background(), cfg, tgt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(r.Achieved, "req/s")
			if cfg.Rate > 0 {
				b.ReportMetric(r.Achieved/cfg.Rate, "of-asked")
			}
			b.ReportMetric(r.CPU.Cores, "gen-cores")
			b.ReportMetric(float64(r.Corrected.ValueAtPercentile(50))/1e3, "p50-us")
			b.ReportMetric(float64(r.Corrected.ValueAtPercentile(99))/1e3, "p99-us")
			if r.Invalid {
				b.Logf("invalid: %s", r.InvalidReason)
			}
			b.Logf("%s: %.0f req/s, generator %s, errors %d", kind, r.Achieved, r.CPU, r.ErrorCount())
		})
	}
}
