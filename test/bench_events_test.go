package test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"ringkv/loadgen"
)

// TestBenchFollowsRingAdd: kvctl bench at a constant rate against a 4-process cluster while
// kvctl ring add runs records the change's begin and commit and cuts its report into at least
// three phases (before, streaming, after), each with its own percentiles.
func TestBenchFollowsRingAdd(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, 1)
	founders, n4 := c.nodes[:3], c.nodes[3]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if r := c.kvctl(ctx, founders[0], "bench", "fill", "--keys", "8000", "--value-size", "200", "--connections", "16"); r.code != 0 {
		t.Fatalf("bench fill: exit %d\n%s", r.code, r.stderr)
	}

	// What is asserted is the events and the phases, not a rate: --max-lag 1m keeps a busy
	// machine from making the result invalid (exit 1; at a load average of 30-45 the requests
	// took 60 ms on average once the add began, so 8 connections could offer 133 of the 200
	// req/s and the generator ended 4.8 s behind), and 32 connections keep it near its schedule.
	// 25 s, not 12: at a load average of 12-17 the add began 5 s after kvctl ring add was run
	// (at 9 s) and committed after a 12 s run had ended.
	bench := c.kvctlCmd(ctx, founders[1], "bench", "--rate", "200", "--duration", "25s", "--warmup", "1s",
		"--workload", "mixed:get=90,put=10", "--keys", "8000", "--value-size", "200", "--connections", "32",
		"--max-errors", "100", "--max-lag", "1m", "-o", "json")
	var out, errOut bytes.Buffer
	bench.Stdout, bench.Stderr = &out, &errOut
	if err := bench.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // the "before" phase: a few measured seconds
	add := c.kvctl(ctx, founders[0], "ring", "add", n4.id+"="+n4.grpc, "--yes", "--rate", "0.5", "-o", "json")
	if add.code != 0 {
		t.Fatalf("ring add: exit %d\n%s", add.code, add.stderr)
	}
	err := bench.Wait()
	t.Logf("bench stderr:\n%s", errOut.String())
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	var rep loadgen.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("bench JSON: %v\n%s", err, out.String())
	}
	kinds := map[string]int{}
	for _, e := range rep.Events {
		kinds[e.Kind]++
		t.Logf("event %6.1fs %-12s %s", e.AtS, e.Kind, e.Text)
	}
	for _, k := range []loadgen.EventKind{loadgen.EventChangeBegin, loadgen.EventCommit} {
		if kinds[string(k)] != 1 {
			t.Errorf("%d %s events, want 1", kinds[string(k)], k)
		}
	}
	var begin, commit float64
	for _, e := range rep.Events {
		switch loadgen.EventKind(e.Kind) {
		case loadgen.EventChangeBegin:
			begin = e.AtS
		case loadgen.EventCommit:
			commit = e.AtS
		}
	}
	if !(begin > 0 && commit > begin) {
		t.Errorf("begin at %.1fs, commit at %.1fs: want 0 < begin < commit", begin, commit)
	}
	var names []string
	for _, p := range rep.Phases {
		names = append(names, p.Name)
		t.Logf("phase %-12s %5.1f-%5.1fs requests %5d errors %3d p50 %.2fms p99 %.2fms p99.9 %.2fms max %.2fms",
			p.Name, p.StartS, p.EndS, p.Requests, p.Errors, p.P50Ms, p.P99Ms, p.P999Ms, p.MaxMs)
		if p.Requests == 0 || p.P50Ms <= 0 || p.P99Ms < p.P50Ms || p.P999Ms < p.P99Ms || p.MaxMs < p.P999Ms {
			t.Errorf("phase %s: requests %d, p50 %g p99 %g p99.9 %g max %g: want requests and ordered percentiles",
				p.Name, p.Requests, p.P50Ms, p.P99Ms, p.P999Ms, p.MaxMs)
		}
	}
	// The chart of the run marks the change: its begin and its commit under the time axis.
	chart := loadgen.Chart(rep.Seconds, rep.Events, 100)
	t.Logf("chart:\n%s", chart)
	for _, want := range []string{"▲", "begin ", "commit "} {
		if !strings.Contains(chart, want) {
			t.Errorf("chart lacks the marker %q", want)
		}
	}
	if len(rep.Phases) < 3 || rep.Phases[0].Name != "before" || !strings.HasPrefix(rep.Phases[len(rep.Phases)-1].Name, "after") {
		t.Errorf("phases %v, want at least 3, from before to after", names)
	}
}
