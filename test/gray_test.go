package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"ringkv/loadgen"
	"ringkv/proto/kvpb"
)

// Gray failures: one node of three answers, but badly. Each drill runs a constant-rate mix
// of quorum writes and reads, reports p50/p99/max and errors before, during and after the
// fault, checks with kvctl bench check that no acknowledged write is lost, and checks that
// kvctl status names the node and what is wrong within 10 s.

// grayUID is the user the gray node runs as, so that iptables can tell its packets
// (-m owner): one per test process.
func grayUID() uint32 { return uint32(61000 + os.Getpid()%4000) }

// grayDir is a data directory the gray node's user owns, outside the test's private
// temporary directory (which only root can enter).
func grayDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ringkv-gray-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	must(t, os.Chown(dir, int(grayUID()), int(grayUID())))
	return filepath.Join(dir, "data")
}

// grayCluster starts n1..n3 with n3 as grayUID. It skips unless root with iptables.
func grayCluster(t *testing.T, flags ...string) *tcluster {
	t.Helper()
	long(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the gray node runs as another user and iptables drops its packets")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("needs iptables")
	}
	b := buildBins(t)
	must(t, os.Chmod(filepath.Dir(b.kvnode), 0o755)) // the gray node's user runs kvnode
	dir := grayDir(t)
	return startClusterSetup(t, 3, 0, flags, map[string]string{"n3": dir}, func(p *proc) {
		if p.id == "n3" {
			p.cred = &syscall.Credential{Uid: grayUID(), Gid: grayUID()}
		}
	})
}

// packetLoss drops a share of the packets on every TCP connection of the gray node's user,
// both ways (its connections are marked by their first packet it sends; each packet crosses
// OUTPUT once on loopback). 0 removes the rule. Rules live in a chain of this process's,
// removed at cleanup.
type packetLoss struct {
	t     *testing.T
	chain string
}

func newPacketLoss(t *testing.T) *packetLoss {
	t.Helper()
	l := &packetLoss{t: t, chain: fmt.Sprintf("RINGKV-GRAY-%d", os.Getpid())}
	l.ipt("-N", l.chain)
	l.ipt("-I", "OUTPUT", "-j", l.chain)
	t.Cleanup(func() {
		l.ipt("-D", "OUTPUT", "-j", l.chain)
		l.ipt("-F", l.chain)
		l.ipt("-X", l.chain)
	})
	return l
}

func (l *packetLoss) ipt(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("iptables %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// dropped is how many packets the rule dropped since it was set.
func (l *packetLoss) dropped() string {
	out, err := exec.Command("iptables", "-L", l.chain, "-v", "-n", "-x").CombinedOutput()
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[2] == "DROP" {
			return f[0] + " packets dropped"
		}
	}
	return "no drop rule"
}

func (l *packetLoss) set(share float64) {
	l.t.Helper()
	l.ipt("-F", l.chain)
	if share == 0 {
		return
	}
	mark := fmt.Sprintf("0x%x", 0x2700+os.Getpid()%256)
	l.ipt("-A", l.chain, "-m", "owner", "--uid-owner", fmt.Sprint(grayUID()), "-j", "CONNMARK", "--set-mark", mark)
	l.ipt("-A", l.chain, "-p", "tcp", "-m", "connmark", "--mark", mark, "-m", "statistic", "--mode", "random",
		"--probability", fmt.Sprint(share), "-j", "DROP")
}

// balancer is a load balancer in front of nodes' HTTP ports: it checks each node's /readyz
// once a second and sends each request to the next node that answered 200 (to every node
// when none did).
type balancer struct {
	nodes   []*proc
	targets []*loadgen.HTTPTarget
	ready   []atomic.Bool
	next    atomic.Uint64
	// unready counts, per node, the health checks it failed; grayOut those that failed
	// because it found itself gray.
	unready, grayOut []atomic.Int64
	stop    chan struct{}
	done    sync.WaitGroup
	started time.Time
	mu      sync.Mutex
	flips   []string // readiness changes seen, with when
}

var _ loadgen.Target = (*balancer)(nil)

func newBalancer(nodes []*proc, conns int) *balancer {
	b := &balancer{nodes: nodes, ready: make([]atomic.Bool, len(nodes)), unready: make([]atomic.Int64, len(nodes)),
		grayOut: make([]atomic.Int64, len(nodes)), stop: make(chan struct{}), started: time.Now()}
	for i, p := range nodes {
		b.targets = append(b.targets, loadgen.NewHTTPTarget(p.http, conns, 0, 0))
		b.ready[i].Store(true)
	}
	check := &http.Client{Timeout: time.Second}
	b.done.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			var wg sync.WaitGroup
			for i, p := range nodes {
				wg.Go(func() {
					resp, err := check.Get("http://" + p.admin + "/readyz")
					ok := err == nil && resp.StatusCode == http.StatusOK
					if err == nil {
						body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
						resp.Body.Close()
						if strings.Contains(string(body), "gray: "+p.id+" ") {
							b.grayOut[i].Add(1)
						}
					}
					if b.ready[i].Swap(ok) != ok {
						b.mu.Lock()
						b.flips = append(b.flips, fmt.Sprintf("%s ready=%v at %v", p.id, ok, time.Since(b.started).Round(100*time.Millisecond)))
						b.mu.Unlock()
					}
					if !ok {
						b.unready[i].Add(1)
					}
				})
			}
			wg.Wait()
			select {
			case <-b.stop:
				return
			case <-tick.C:
			}
		}
	})
	return b
}

func (b *balancer) close() {
	close(b.stop)
	b.done.Wait()
	for _, t := range b.targets {
		t.Close()
	}
}

func (b *balancer) pick() *loadgen.HTTPTarget {
	n := uint64(len(b.targets))
	start := b.next.Add(1)
	for k := range n {
		if i := (start + k) % n; b.ready[i].Load() {
			return b.targets[i]
		}
	}
	return b.targets[start%n]
}

func (b *balancer) Get(ctx context.Context, conn int, key string) loadgen.Kind {
	return b.pick().Get(ctx, conn, key)
}

func (b *balancer) Put(ctx context.Context, conn int, key string, value []byte) loadgen.Kind {
	return b.pick().Put(ctx, conn, key, value)
}

func (b *balancer) Delete(ctx context.Context, conn int, key string) loadgen.Kind {
	return b.pick().Delete(ctx, conn, key)
}

// ackLog writes acknowledged writes in kvctl bench --record's format, for kvctl bench check.
type ackLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
	w    *bufio.Writer
	enc  *json.Encoder
	n    int
}

func newAckLog(t *testing.T) *ackLog {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acked.jsonl")
	f, err := os.Create(path)
	must(t, err)
	w := bufio.NewWriter(f)
	return &ackLog{path: path, f: f, w: w, enc: json.NewEncoder(w)}
}

func (a *ackLog) ack(op loadgen.Op, key string, value []byte) {
	rec := struct {
		Key     string `json:"key"`
		Value   []byte `json:"value_base64,omitempty"`
		Deleted bool   `json:"deleted,omitempty"`
	}{key, value, op == loadgen.OpDelete}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.enc.Encode(rec)
	a.n++
}

func (a *ackLog) close(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	must(t, a.w.Flush())
	must(t, a.f.Close())
}

// drillPhase is a stretch of a drill's load.
type drillPhase struct {
	name       string
	from, to   time.Duration // offsets from the start of the load
	reqs, errs int64
	hist       *hdr.Histogram
}

func (p *drillPhase) String() string {
	if p.hist.TotalCount() == 0 {
		return fmt.Sprintf("%-22s no requests", p.name)
	}
	ms := func(v int64) float64 { return float64(v) / 1e6 }
	return fmt.Sprintf("%-22s %6d req %4d err  p50 %7.2fms  p99 %8.2fms  max %8.2fms",
		p.name, p.reqs, p.errs, ms(p.hist.ValueAtQuantile(50)), ms(p.hist.ValueAtQuantile(99)), ms(p.hist.Max()))
}

func (p *drillPhase) p99() float64 { return float64(p.hist.ValueAtQuantile(99)) / 1e6 }

// cutPhases folds the run's seconds into the phases they lie in.
func cutPhases(r *loadgen.Result, phases []*drillPhase) {
	for _, p := range phases {
		p.hist = loadgen.NewHistogram()
	}
	for _, iv := range r.Intervals {
		for _, p := range phases {
			if iv.Start >= p.from && iv.Start < p.to {
				p.reqs += iv.Requests
				p.errs += iv.Errors
				addPacked(p.hist, iv.Hist)
			}
		}
	}
}

// addPacked adds the samples of a packed histogram to h, one per rank (the packed form has
// no merge).
func addPacked(h *hdr.Histogram, p *hdr.PackedHistogram) {
	if p == nil || p.TotalCount() == 0 {
		return
	}
	n := p.TotalCount()
	ps := make([]float64, n)
	for i := range ps {
		ps[i] = 100 * (float64(i) + 0.5) / float64(n)
	}
	for _, v := range p.ValueAtPercentilesSlice(ps) {
		h.RecordValue(v)
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

// grayNamed polls kvctl status through node via until it prints a line naming node id gray
// with want in it, and returns the line and when it first did (0 when not within d).
func (c *tcluster) grayNamed(via *proc, id, want string, d time.Duration) (string, time.Duration) {
	start := time.Now()
	for time.Since(start) < d {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		out, _ := c.kvctlCmd(ctx, via, "status").Output()
		cancel()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "gray: "+id+" ") && strings.Contains(l, want) {
				return l, time.Since(start)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return "", 0
}

// logLinks logs each node's view of its links (NodeInfo.links).
func (c *tcluster) logLinks(nodes ...*proc) {
	for _, p := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		info, err := c.admin(p).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
		cancel()
		if err != nil {
			c.t.Logf("%s links: %v", p.id, err)
			continue
		}
		var parts []string
		for _, l := range info.GetLinks() {
			parts = append(parts, fmt.Sprintf("%s %d calls %d failed %d late mean %.1fms flaps %d, %d of %d segments retransmitted",
				l.GetPeer(), l.GetCalls(), l.GetFailed(), l.GetLate(), float64(l.GetMeanMicros())/1000, l.GetFlaps(),
				l.GetRetransmits(), l.GetSegments()))
		}
		c.t.Logf("%s links: %s", p.id, strings.Join(parts, "; "))
	}
}

// readyz is node p's /readyz status code (0 when it does not answer).
func readyz(p *proc) int {
	code, _, err := request(http.MethodGet, "http://"+p.admin+"/readyz", nil)
	if err != nil {
		return 0
	}
	return code
}

// TestGrayLossyNode: 5% and then 20% of the packets of n3 dropped, with the load spread over
// all three nodes by a balancer that health-checks /readyz. n3 must find itself the odd one
// out and leave readiness within 10 s while n1 and n2 stay ready, kvctl status must name it
// lossy, and no acknowledged write may be lost.
func TestGrayLossyNode(t *testing.T) {
	c := grayCluster(t)
	loss := newPacketLoss(t)
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	lb := newBalancer([]*proc{n1, n2, n3}, 32)
	defer lb.close()
	acks := newAckLog(t)

	const (
		before = 8 * time.Second
		fault  = 25 * time.Second
		notice = 10 * time.Second
		gap    = 12 * time.Second
	)
	shares := []float64{0.05, 0.20}
	cfg := loadgen.DefaultConfig()
	cfg.Rate, cfg.Connections, cfg.Warmup = 200, 32, 0
	cfg.Duration = before + time.Duration(len(shares))*(fault+gap)
	cfg.Workload = loadgen.Mix{Get: 50, Put: 50}
	cfg.Keys, cfg.KeyDist = 10_000_000, loadgen.KeyDist{Kind: loadgen.DistSequential}
	cfg.KeyPrefix = "gray-loss:"
	cfg.MaxErrors, cfg.MaxLag = 1, time.Hour // a drill measures what the cluster does, whatever it is
	cfg.KeepIntervals, cfg.OnAck = true, acks.ack

	type outcome struct {
		r   *loadgen.Result
		err error
	}
	ran := make(chan outcome, 1)
	start := time.Now()
	go func() {
		r, err := loadgen.Run(context.Background(), cfg, lb)
		ran <- outcome{r, err}
	}()
	phases := []*drillPhase{{name: "before", from: 2 * time.Second, to: before}}
	at := before
	for _, share := range shares {
		time.Sleep(time.Until(start.Add(at)))
		load := loadAvg()
		loss.set(share)
		faultAt := time.Now()
		peek := time.AfterFunc(5*time.Second, func() { c.logLinks(n1, n2, n3) })
		line, took := c.grayNamed(n1, "n3", "lossy", 15*time.Second)
		unreadyAt := time.Duration(0)
		for time.Since(faultAt) < 15*time.Second {
			if readyz(n3) == http.StatusServiceUnavailable {
				unreadyAt = time.Since(faultAt)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		peek.Stop()
		c.logLinks(n1, n2, n3)
		t.Logf("%.0f%% loss on n3 (load %s): kvctl status named it after %v: %q; n3 unready after %v",
			100*share, load, took.Round(100*time.Millisecond), line, unreadyAt.Round(100*time.Millisecond))
		if line == "" {
			t.Errorf("%.0f%% loss: kvctl status did not name n3 lossy within 15 s", 100*share)
		} else if took > notice {
			t.Errorf("%.0f%% loss: kvctl status named n3 after %v, want within %v", 100*share, took, notice)
		}
		if unreadyAt == 0 {
			t.Errorf("%.0f%% loss: n3's /readyz still 200 after 15 s", 100*share)
		}
		phases = append(phases,
			&drillPhase{name: fmt.Sprintf("%.0f%% loss, first 10s", 100*share), from: at, to: at + notice},
			&drillPhase{name: fmt.Sprintf("%.0f%% loss, after 10s", 100*share), from: at + notice, to: at + fault})
		time.Sleep(time.Until(start.Add(at + fault)))
		t.Logf("%.0f%% loss on n3: %s", 100*share, loss.dropped())
		loss.set(0)
		phases = append(phases, &drillPhase{name: fmt.Sprintf("after %.0f%% loss", 100*share), from: at + fault + 2*time.Second, to: at + fault + gap})
		at += fault + gap
	}
	o := <-ran
	if o.err != nil {
		t.Fatalf("load: %v", o.err)
	}
	cutPhases(o.r, phases)
	t.Logf("lossy node drill, load average %s, %.0f req/s mixed get=50,put=50 at quorum over n1..n3 by /readyz:", loadAvg(), cfg.Rate)
	for _, p := range phases {
		t.Logf("  %s", p)
	}
	for _, iv := range o.r.Intervals {
		t.Logf("  second %3.0f: %4d req %3d err p99 %7.1fms max %7.1fms", iv.Start.Seconds(), iv.Requests, iv.Errors,
			float64(iv.P99.Microseconds())/1000, float64(iv.Max.Microseconds())/1000)
	}
	t.Logf("readiness changes seen by the balancer: %s", strings.Join(lb.flips, "; "))
	for i, p := range []*proc{n1, n2, n3} {
		t.Logf("%s failed %d health checks, %d of them as gray", p.id, lb.unready[i].Load(), lb.grayOut[i].Load())
		if g := lb.grayOut[i].Load(); g > 0 && p != n3 {
			t.Errorf("%s found itself gray %d times: a healthy node was taken out", p.id, g)
		}
	}
	waitFor(t, 30*time.Second, "n3 ready again once the loss ends", func() error {
		if code := readyz(n3); code != http.StatusOK {
			return fmt.Errorf("n3 /readyz %d", code)
		}
		return nil
	})
	acks.close(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := c.kvctl(ctx, n1, "bench", "check", acks.path, "--ack", "2", "--from", "3")
	t.Logf("%d acknowledged writes: %s", acks.n, strings.TrimSpace(res.stdout))
	if res.code != 0 {
		t.Errorf("kvctl bench check: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
