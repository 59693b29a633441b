package test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

// latencySample is one client request: when it was meant to start and how long it took from
// then (the open model: a late send counts against the request).
type latencySample struct {
	intended time.Time
	latency  time.Duration
	err      error
	put      bool
	via      string // the node the request was sent to (its coordinator)
}

// openLoad issues rate requests per second (90% GET, 10% PUT with the default quorum) over
// workers connections through nodes until ctx ends, each request at its intended time.
func openLoad(ctx context.Context, c *tcluster, nodes []*proc, rate float64, workers, keys, size int) []latencySample {
	var mu sync.Mutex
	var out []latencySample
	var wg sync.WaitGroup
	start := time.Now()
	every := time.Duration(float64(time.Second) * float64(workers) / rate)
	for w := range workers {
		wg.Go(func() {
			kv := c.kv(nodes[w%len(nodes)])
			var mine []latencySample
			for i := 0; ; i++ {
				intended := start.Add(time.Duration(i)*every + time.Duration(w)*every/time.Duration(workers))
				if d := time.Until(intended); d > 0 {
					select {
					case <-ctx.Done():
						mu.Lock()
						out = append(out, mine...)
						mu.Unlock()
						return
					case <-time.After(d):
					}
				} else if ctx.Err() != nil {
					mu.Lock()
					out = append(out, mine...)
					mu.Unlock()
					return
				}
				key := fmt.Sprintf("k%06d", (i*workers+w)*7919%keys)
				rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				var err error
				put := i%10 == 9
				if put {
					_, err = kv.Put(rctx, &kvpb.PutRequest{Key: []byte(key), Value: valueOf(key, size)})
				} else {
					_, err = kv.Get(rctx, &kvpb.GetRequest{Key: []byte(key)})
				}
				cancel()
				mine = append(mine, latencySample{intended, time.Since(intended), err, put, nodes[w%len(nodes)].id})
			}
		})
	}
	wg.Wait()
	return out
}

// phase summarises the samples intended in [from, to) for which keep is true (nil: all).
func phase(s []latencySample, from, to time.Time, keep func(latencySample) bool) (n, errs int, p50, p99, max time.Duration) {
	var ls []time.Duration
	for _, x := range s {
		if x.intended.Before(from) || !x.intended.Before(to) || keep != nil && !keep(x) {
			continue
		}
		if x.err != nil {
			errs++
		}
		ls = append(ls, x.latency)
	}
	if len(ls) == 0 {
		return 0, errs, 0, 0, 0
	}
	slices.Sort(ls)
	at := func(p float64) time.Duration { return ls[min(len(ls)-1, int(p*float64(len(ls))))] }
	return len(ls), errs, at(0.50), at(0.99), ls[len(ls)-1]
}

// TestRingAddBench measures an add under client load: the streaming rate and the clients'
// p99 before, during and after. Run with RINGKV_BENCH=1 (docs/bench.md, "Ring changes").
// RINGKV_BENCH_RATE sets kvctl's --rate (default 0: unthrottled); RINGKV_BENCH_LATENCY_TARGET
// (a duration, e.g. 6ms) starts every kvnode with --move-latency-target.
func TestRingAddBench(t *testing.T) {
	if os.Getenv("RINGKV_BENCH") == "" {
		t.Skip("set RINGKV_BENCH=1 to run the ring-change benchmark")
	}
	rate := os.Getenv("RINGKV_BENCH_RATE")
	if rate == "" {
		rate = "0"
	}
	var flags []string // for every kvnode
	if target := os.Getenv("RINGKV_BENCH_LATENCY_TARGET"); target != "" {
		if _, err := time.ParseDuration(target); err != nil {
			t.Fatalf("RINGKV_BENCH_LATENCY_TARGET: %v", err)
		}
		flags = []string{"--move-latency-target", target}
		t.Logf("every kvnode with --move-latency-target %s", target)
	}
	const keys, size, clientRate, phaseLen = 100_000, 1024, 1000.0, 10 * time.Second
	var c *tcluster
	if dir := os.Getenv("RINGKV_BENCH_PROFILE"); dir != "" {
		// The nodes' own output (badger's messages; the runtime's GC trace under
		// GODEBUG=gctrace=1), saved once they have stopped: registered before startCluster,
		// this cleanup runs after the one that stops them.
		t.Cleanup(func() {
			for _, p := range c.nodes {
				if err := os.WriteFile(filepath.Join(dir, p.id+".log"), p.log.Bytes(), 0o644); err != nil {
					t.Logf("save log of %s: %v", p.id, err)
				}
			}
		})
	}
	c = startClusterFlags(t, 3, 1, flags)
	founders, n4 := c.nodes[:3], c.nodes[3]
	c.load(founders, keys, size, 32)

	ctx, stop := context.WithCancel(context.Background())
	var samples []latencySample
	done := make(chan struct{})
	go func() {
		defer close(done)
		samples = openLoad(ctx, c, founders, clientRate, 16, keys, size)
	}()
	// A warm-up first: badger compacts what the load wrote.
	warm := time.Now()
	waitFor(t, 3*phaseLen, "the warm-up", func() error {
		if time.Since(warm) < 2*phaseLen {
			return fmt.Errorf("%s of %s", time.Since(warm).Round(time.Second), 2*phaseLen)
		}
		return nil
	})
	t0 := time.Now()
	cpu0 := cpuTimes(c.nodes)
	waitFor(t, 2*phaseLen, "the before phase", func() error {
		if time.Since(t0) < phaseLen {
			return fmt.Errorf("%s of %s", time.Since(t0).Round(time.Second), phaseLen)
		}
		return nil
	})
	t1 := time.Now()
	profiled := profileDuringAdd(t, []*proc{founders[0], n4})
	cpu1 := cpuTimes(c.nodes)
	if os.Getenv("RINGKV_BENCH_LOG") != "" {
		logStarts(t, c.nodes)
	}
	stopSampling := sampleCPU(c.nodes)
	res := c.kvctl(context.Background(), founders[0], "ring", "add", n4.id+"="+n4.grpc, "--yes", "--rate", rate, "-o", "json")
	t2 := time.Now()
	cpu2 := cpuTimes(c.nodes)
	timeline := stopSampling()
	profiled()
	if res.code != 0 {
		stop()
		<-done
		t.Fatalf("kvctl ring add: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	waitFor(t, 2*phaseLen, "the after phase", func() error {
		if time.Since(t2) < phaseLen {
			return fmt.Errorf("%s of %s", time.Since(t2).Round(time.Second), phaseLen)
		}
		return nil
	})
	t3 := time.Now()
	stop()
	<-done

	p := progressOf(t, res)
	first, last := logMover(t, c, n4)
	keysMoved, moved, _ := c.streamedBytes([]*proc{n4})
	mib := float64(moved) / (1 << 20)
	secs := t2.Sub(t1).Seconds()
	t.Logf("add with --rate %s: state %s; %d keys, %.1f MiB (%.1f MB) streamed into n4", rate, p.GetState(), keysMoved, mib, float64(moved)/1e6)
	t.Logf("wall:      kvctl ring add, plan and hand-over included: %.2fs, %.1f MiB/s (%.1f MB/s)", secs, mib/secs, float64(moved)/1e6/secs)
	stream := last.Sub(first).Seconds()
	if !first.IsZero() && stream > 0 {
		t.Logf("streaming: n4's first chunk to its last chunk: %.2fs, %.1f MiB/s (%.1f MB/s); plan before it %.2fs, hand-over after it %.2fs",
			stream, mib/stream, float64(moved)/1e6/stream, first.Sub(t1).Seconds(), t2.Sub(last).Seconds())
	}
	if d := p.GetFinishedUnix() - p.GetStartedUnix(); d > 0 {
		t.Logf("journaled start to commit: %ds (1s resolution): %.1f MiB/s", d, mib/float64(d))
	}
	phases := []struct {
		name     string
		from, to time.Time
	}{{"before", t0, t1}, {"during", t1, t2}}
	if !first.IsZero() {
		phases = append(phases, struct {
			name     string
			from, to time.Time
		}{"stream", first, last})
	}
	phases = append(phases, struct {
		name     string
		from, to time.Time
	}{"after", t2, t3})
	for _, ph := range phases {
		n, errs, p50, p99, mx := phase(samples, ph.from, ph.to, nil)
		_, _, _, getP99, _ := phase(samples, ph.from, ph.to, func(x latencySample) bool { return !x.put })
		_, _, _, putP99, _ := phase(samples, ph.from, ph.to, func(x latencySample) bool { return x.put })
		t.Logf("%-6s %5d requests, %d errors, p50 %s, p99 %s, max %s (p99 of GETs %s, of PUTs %s)", ph.name, n, errs,
			p50.Round(time.Microsecond), p99.Round(time.Microsecond), mx.Round(time.Microsecond), getP99.Round(time.Microsecond), putP99.Round(time.Microsecond))
	}
	t.Logf("(during = requests intended while kvctl ran; stream = intended between n4's first and last chunk)")
	if len(cpu0) > 0 && len(cpu1) == len(cpu0) && len(cpu2) == len(cpu0) {
		// CPU used before and while kvctl ran, in cores (seconds of CPU per second): each
		// node, this test process (the client load), and the whole machine (everyone's work).
		for _, w := range []struct {
			name     string
			from, to []float64
			secs     float64
		}{{"before", cpu0, cpu1, t1.Sub(t0).Seconds()}, {"during", cpu1, cpu2, secs}} {
			var parts []string
			for i, name := range append(ids(c.nodes), "test", "machine") {
				parts = append(parts, fmt.Sprintf("%s %.2f", name, (w.to[i]-w.from[i])/w.secs))
			}
			t.Logf("cpu %s (cores): %s", w.name, strings.Join(parts, ", "))
		}
	}
	if os.Getenv("RINGKV_BENCH_LOG") != "" && !first.IsZero() {
		// Each process's CPU in 50 ms steps from n4's first chunk (cores; /proc's 10 ms ticks).
		for i := 1; i < len(timeline); i++ {
			a, b := timeline[i-1], timeline[i]
			if b.at.Before(first) || b.at.After(last.Add(50*time.Millisecond)) || len(a.cpu) != len(b.cpu) {
				continue
			}
			dt := b.at.Sub(a.at).Seconds()
			var parts []string
			for j, name := range append(ids(c.nodes), "test", "machine") {
				parts = append(parts, fmt.Sprintf("%s %.1f", name, (b.cpu[j]-a.cpu[j])/dt))
			}
			t.Logf("cpu +%s: %s", a.at.Sub(first).Round(10*time.Millisecond), strings.Join(parts, " "))
		}
		// The slowest requests of the stream window, at their offset from n4's first chunk.
		var slow []latencySample
		for _, x := range samples {
			if !x.intended.Before(first) && x.intended.Before(last) {
				slow = append(slow, x)
			}
		}
		slices.SortFunc(slow, func(a, b latencySample) int { return -cmp.Compare(a.latency, b.latency) })
		for _, x := range slow[:min(len(slow), 25)] {
			t.Logf("slow: +%s put=%v via %s %s", x.intended.Sub(first).Round(time.Millisecond), x.put, x.via, x.latency.Round(100*time.Microsecond))
		}
	}
}

// profileDuringAdd, when RINGKV_BENCH_PROFILE names a directory, captures a 5 s CPU profile of
// each of nodes from their admin /debug/pprof while the add runs, into <dir>/<id>.pprof. The
// returned func waits for the captures.
func profileDuringAdd(t *testing.T, nodes []*proc) (wait func()) {
	dir := os.Getenv("RINGKV_BENCH_PROFILE")
	if dir == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for _, p := range nodes {
		wg.Go(func() {
			resp, err := http.Get("http://" + p.admin + "/debug/pprof/profile?seconds=5")
			if err != nil {
				t.Logf("profile %s: %v", p.id, err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, p.id+".pprof"), b, 0o644)
			}
			if err != nil {
				t.Logf("profile %s: %v", p.id, err)
			}
		})
	}
	return wg.Wait
}

// logMover logs how p's mover went: the number of ranges received, and returns when the
// first and the last chunk of the change arrived (from the "range received" lines in the
// node's log tail; zero when they are missing).
func logMover(t *testing.T, c *tcluster, p *proc) (first, last time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lt, err := c.admin(p).LogTail(ctx, &kvpb.LogTailRequest{Lines: 1000})
	if err != nil {
		t.Logf("log tail of %s: %v", p.id, err)
		return
	}
	var received []string
	for _, l := range lt.GetLines() {
		if strings.Contains(l, "range received") || strings.Contains(l, "ring change") || strings.Contains(l, "pull range") {
			received = append(received, l)
		}
		if !strings.Contains(l, "range received") {
			continue
		}
		if f, ok := logTime(l, "first_chunk="); ok && (first.IsZero() || f.Before(first)) {
			first = f
		}
		if f, ok := logTime(l, "last_chunk="); ok && f.After(last) {
			last = f
		}
	}
	t.Logf("%s: %d mover lines", p.id, len(received))
	if os.Getenv("RINGKV_BENCH_LOG") != "" {
		for _, l := range received {
			t.Log(l)
		}
	}
	return first, last
}

// logTime parses the RFC 3339 time after attr (as "first_chunk=") in a text log line.
func logTime(line, attr string) (time.Time, bool) {
	i := strings.Index(line, attr)
	if i < 0 {
		return time.Time{}, false
	}
	v, _, _ := strings.Cut(line[i+len(attr):], " ")
	ts, err := time.Parse(time.RFC3339Nano, v)
	return ts, err == nil
}

// ids returns the ids of ps.
func ids(ps []*proc) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.id)
	}
	return out
}

// cpuTimes returns the CPU seconds (user + system) used so far by each of ps, by this process,
// and by the whole machine (busy time over all CPUs), from /proc; nil where /proc is missing.
func cpuTimes(ps []*proc) []float64 {
	const hz = 100 // USER_HZ
	var out []float64
	for _, pid := range append(pids(ps), os.Getpid()) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil
		}
		// Fields after the command's closing parenthesis: state is field 3; utime 14, stime 15.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			return nil
		}
		var u, s float64
		fmt.Sscan(f[11], &u)
		fmt.Sscan(f[12], &s)
		out = append(out, (u+s)/hz)
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var busy float64
	for i, v := range strings.Fields(line)[1:] {
		var x float64
		fmt.Sscan(v, &x)
		if i != 3 && i != 4 { // idle, iowait
			busy += x
		}
	}
	return append(out, busy/hz)
}

// pids returns the process ids of ps.
func pids(ps []*proc) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.cmd.Process.Pid)
	}
	return out
}

type cpuSample struct {
	at  time.Time
	cpu []float64
}

// sampleCPU samples cpuTimes every 50 ms until the returned func is called, which returns
// the samples.
func sampleCPU(ps []*proc) (stop func() []cpuSample) {
	var out []cpuSample
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			out = append(out, cpuSample{time.Now(), cpuTimes(ps)})
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() []cpuSample {
		close(done)
		<-finished
		return out
	}
}

// logStarts logs when each of ps started (from /proc, 10 ms resolution): the origin of the
// times in its GODEBUG=gctrace=1 lines.
func logStarts(t *testing.T, ps []*proc) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return
	}
	var btime int64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			fmt.Sscan(v, &btime)
		}
	}
	for _, p := range ps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 20 {
			continue
		}
		var ticks int64
		fmt.Sscan(f[19], &ticks) // field 22, starttime
		start := time.Unix(btime, 0).Add(time.Duration(ticks) * 10 * time.Millisecond)
		t.Logf("process %s started %s", p.id, start.UTC().Format(time.RFC3339Nano))
	}
}
