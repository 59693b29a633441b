package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"ringkv/loadgen"
	"ringkv/proto/kvpb"
)

// Gray failures: one node of three answers, but badly. Each drill runs a constant-rate mix
// of quorum writes and reads, reports p50/p99/max and errors before, during and after the
// fault, checks with kvctl bench check that no acknowledged write is lost, and checks that
// kvctl status names the node and what is wrong within 10 s.

// grayUID is the user the gray node of drill k runs as, so that iptables can tell its
// packets (-m owner): one per drill of each test process (drills run side by side).
func grayUID(k int) uint32 { return uint32(61000 + grayDrills*(os.Getpid()%2000) + k) }

// grayDrills is how many drills (k) a test process may run: TestGrayNetwork, TestGrayCuts,
// TestGrayDiskAndFlapping.
const grayDrills = 3

// grayDir is a directory the gray node's user owns, in memory (memDir), outside the test's
// private temporary directory (which only root can enter).
func grayDir(t *testing.T, uid uint32) string { return ownedDir(t, memDir(), uid) }

// hostDir is grayDir on the host's disk (the default temporary directory): the slow-disk
// drill's, which runs alone (test.sh), its nodes' data on the disk whose writes it throttles
// for n3 (slowDisk). A loop file in /dev/shm beside peers in /dev/shm was named slow before
// its fault; three loop devices in /dev/shm collapsed under the suite's load.
func hostDir(t *testing.T, uid uint32) string { return ownedDir(t, "", uid) }

// ownedDir is a new directory under root ("" the default temporary directory) that uid owns,
// removed when t ends.
func ownedDir(t *testing.T, root string, uid uint32) string {
	t.Helper()
	dir, err := os.MkdirTemp(root, "ringkv-gray-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	must(t, os.Chown(dir, int(uid), int(uid)))
	return dir
}

// memDir is where the drills keep their nodes' data: in memory (/dev/shm) where the machine
// has it, so that what the host's disk does beside them does not make a node gray (a compose
// cluster's image build beside the slow-disk drill made n3's fsyncs late for 45 s before the
// fault). "" (the default temporary directory) elsewhere. The slow-disk drill's nodes keep
// their data on the host's disk (hostDir), and it runs alone.
func memDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return ""
}

// grayCluster starts n1..n3 with n3 as grayUID(k), on data directories of their own in
// memory unless dirs names one (by node id), with flags for every node, calling setup (when
// set) on each node before. It skips unless root with iptables.
func grayCluster(t *testing.T, k int, flags []string, dirs map[string]string, setup func(*proc)) *tcluster {
	t.Helper()
	grayNeeds(t)
	b := buildBins(t)
	must(t, os.Chmod(filepath.Dir(b.kvnode), 0o755)) // the gray node's user runs kvnode
	all := map[string]string{"n3": filepath.Join(grayDir(t, grayUID(k)), "data")}
	mem := grayDir(t, 0)
	for _, id := range []string{"n1", "n2"} {
		all[id] = filepath.Join(mem, id)
	}
	maps.Copy(all, dirs)
	return startClusterSetup(t, 3, 0, flags, all, func(p *proc) {
		if p.id == "n3" {
			p.cred = &syscall.Credential{Uid: grayUID(k), Gid: grayUID(k)}
		}
		if setup != nil {
			setup(p)
		}
	})
}

// grayNeeds skips unless the test runs as root with iptables (the gray node runs as another
// user, and iptables drops its packets).
func grayNeeds(t *testing.T) {
	t.Helper()
	long(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the gray node runs as another user and iptables drops its packets")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("needs iptables")
	}
}

// grayChain is the prefix of the iptables chains of the drills; a chain's name goes on with
// the pid of the test process that made it.
const grayChain = "RINGKV-GRAY-"

// sweepGrayChains removes the drills' chains left by test processes that are gone (killed
// before their cleanup ran), with their jumps from OUTPUT.
func sweepGrayChains(t *testing.T) {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "-S").CombinedOutput()
	if err != nil {
		t.Logf("iptables -S: %v %s", err, out)
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != "-N" || !strings.HasPrefix(f[1], grayChain) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(strings.TrimPrefix(f[1], grayChain), "%d", &pid); err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || err == syscall.EPERM {
			continue // its test process still runs
		}
		for exec.Command("iptables", "-w", "-D", "OUTPUT", "-j", f[1]).Run() == nil {
		}
		exec.Command("iptables", "-w", "-F", f[1]).Run()
		if out, err := exec.Command("iptables", "-w", "-X", f[1]).CombinedOutput(); err != nil {
			t.Logf("iptables -X %s (a stale chain): %v %s", f[1], err, out)
		} else {
			t.Logf("removed the stale chain %s of process %d", f[1], pid)
		}
	}
}

// packetLoss drops a share of the packets on every TCP connection of the gray node's user,
// both ways (its connections are marked by their first packet it sends; each packet crosses
// OUTPUT once on loopback). 0 removes the rule. Rules live in a chain of this process's
// drill k, removed at cleanup; chains of test processes that are gone are swept first.
type packetLoss struct {
	t     *testing.T
	chain string
	uid   uint32
	mark  string
}

func newPacketLoss(t *testing.T, k int) *packetLoss {
	t.Helper()
	sweepGrayChains(t)
	l := &packetLoss{t: t, chain: fmt.Sprintf("%s%d-%d", grayChain, os.Getpid(), k), uid: grayUID(k),
		mark: fmt.Sprintf("0x%x", 0x2700+(grayDrills*os.Getpid()+k)%256)}
	l.ipt("-N", l.chain)
	t.Cleanup(func() {
		exec.Command("iptables", "-w", "-D", "OUTPUT", "-j", l.chain).Run()
		exec.Command("iptables", "-w", "-F", l.chain).Run()
		exec.Command("iptables", "-w", "-X", l.chain).Run()
	})
	l.ipt("-I", "OUTPUT", "-j", l.chain)
	return l
}

func (l *packetLoss) ipt(args ...string) {
	l.t.Helper()
	// -w: wait for the xtables lock that a drill beside this one may hold.
	if out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
		l.t.Fatalf("iptables %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// dropped is how many packets the rule dropped since it was set.
func (l *packetLoss) dropped() string {
	out, err := exec.Command("iptables", "-w", "-L", l.chain, "-v", "-n", "-x").CombinedOutput()
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

// rules replaces the chain's rules with these (none: the chain is emptied).
func (l *packetLoss) rules(rules ...[]string) {
	l.t.Helper()
	l.ipt("-F", l.chain)
	for _, r := range rules {
		l.ipt(append([]string{"-A", l.chain}, r...)...)
	}
}

func (l *packetLoss) set(share float64) {
	l.t.Helper()
	l.ipt("-F", l.chain)
	if share == 0 {
		return
	}
	l.ipt("-A", l.chain, "-m", "owner", "--uid-owner", fmt.Sprint(l.uid), "-j", "CONNMARK", "--set-mark", l.mark)
	l.ipt("-A", l.chain, "-p", "tcp", "-m", "connmark", "--mark", l.mark, "-m", "statistic", "--mode", "random",
		"--probability", fmt.Sprint(share), "-j", "DROP")
}

// slowDisk slows one node's writes to the host's own disk: a blkio cgroup (v1: this
// machine's io controller) that the node's process joins, whose throttle caps the writes its
// processes make to the block device under the node's data directory at some I/O operations
// per second; its fsyncs wait for them. Its peers' data lies on the same disk, outside the
// cgroup, and their fsyncs do not wait (a 4 KiB write with O_DSYNC took 0.13-0.17 ms beside a
// throttled one taking 30 ms). A loop device for the node's data was tried first: under two
// spin loops it took 48 ms a write against its peers' 15 ms before any fault, and three loop
// devices made every node slow.
type slowDisk struct {
	t       *testing.T
	dir, cg string
	dev     string // major:minor of the disk
}

// newSlowDisk makes the node's directory on the host's disk, owned by uid, and the cgroup;
// an error when the machine cannot (no blkio throttle, no block device under the directory).
func newSlowDisk(t *testing.T, uid uint32) (*slowDisk, error) {
	t.Helper()
	cgRoot := "/sys/fs/cgroup/blkio"
	if _, err := os.Stat(filepath.Join(cgRoot, "blkio.throttle.write_iops_device")); err != nil {
		return nil, fmt.Errorf("no blkio throttle: %w", err)
	}
	d := &slowDisk{t: t, dir: hostDir(t, uid)}
	var st syscall.Stat_t
	if err := syscall.Stat(d.dir, &st); err != nil {
		return nil, err
	}
	major, minor := unix.Major(st.Dev), unix.Minor(st.Dev)
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", major, minor)
	if _, err := os.Stat(sys); err != nil {
		return nil, fmt.Errorf("%s is on no block device (%d:%d)", d.dir, major, minor)
	}
	d.dev = fmt.Sprintf("%d:%d", major, minor)
	// The throttle is the whole disk's: a partition's writes count on its disk.
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		dev, err := os.ReadFile(filepath.Join(sys, "..", "dev"))
		if err != nil {
			return nil, err
		}
		d.dev = strings.TrimSpace(string(dev))
	}
	d.cg = filepath.Join(cgRoot, fmt.Sprintf("ringkv-gray-%d", os.Getpid()))
	if err := os.Mkdir(d.cg, 0o755); err != nil {
		d.cg = ""
		return nil, err
	}
	t.Cleanup(d.close)
	return d, nil
}

// data is the node's data directory.
func (d *slowDisk) data() string { return filepath.Join(d.dir, "data") }

// join moves process pid (every thread) into the cgroup.
func (d *slowDisk) join(pid int) {
	d.t.Helper()
	must(d.t, os.WriteFile(filepath.Join(d.cg, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0))
}

// limit caps the disk's writes from the cgroup at iops per second (0: no cap).
func (d *slowDisk) limit(iops int) {
	d.t.Helper()
	must(d.t, os.WriteFile(filepath.Join(d.cg, "blkio.throttle.write_iops_device"), []byte(fmt.Sprintf("%s %d", d.dev, iops)), 0))
}

// close runs after the cluster's cleanup (registered before it): the node is gone.
func (d *slowDisk) close() {
	os.WriteFile(filepath.Join(d.cg, "blkio.throttle.write_iops_device"), []byte(d.dev+" 0"), 0)
	if err := os.Remove(d.cg); err != nil {
		d.t.Logf("remove cgroup %s: %v", d.cg, err)
	}
}

// balancer is a load balancer in front of nodes' HTTP ports: it checks each node's /readyz
// once a second and sends each request to the next node that answered 200 (to every node
// when none did), of those the drill has not taken out (rotate).
type balancer struct {
	nodes   []*proc
	targets []*loadgen.HTTPTarget
	ready   []atomic.Bool
	// out are the nodes the drill keeps out of rotation, whatever their /readyz; busy the
	// requests in flight to each node.
	out  []atomic.Bool
	busy []atomic.Int64
	next atomic.Uint64
	// unready counts, per node, the health checks it failed; grayOut those that failed
	// because it found itself gray.
	unready, grayOut []atomic.Int64
	stop             chan struct{}
	done             sync.WaitGroup
	started          time.Time
	mu               sync.Mutex
	changes          []string // readiness changes seen, with when
	// errs are the requests that failed (the first maxErrLog).
	errs []failedReq
}

// failedReq is a request that failed: when it was sent (since the balancer started), to
// which node, and how.
type failedReq struct {
	at   time.Duration
	node string
	kind loadgen.Kind
	text string
}

const maxErrLog = 50

// failed is what the balancer saw of the requests that failed.
func (b *balancer) failed() []failedReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.errs)
}

func (b *balancer) flips() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.changes)
}

var _ loadgen.Target = (*balancer)(nil)

func newBalancer(nodes []*proc, conns int) *balancer {
	b := &balancer{nodes: nodes, ready: make([]atomic.Bool, len(nodes)), out: make([]atomic.Bool, len(nodes)), busy: make([]atomic.Int64, len(nodes)),
		unready: make([]atomic.Int64, len(nodes)),
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
					why := ""
					if err == nil {
						body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
						resp.Body.Close()
						if strings.Contains(string(body), "gray: "+p.id+" ") {
							b.grayOut[i].Add(1)
						}
						if !ok {
							why = ": " + strings.TrimSpace(string(body))
						}
					}
					if b.ready[i].Swap(ok) != ok {
						b.mu.Lock()
						b.changes = append(b.changes, fmt.Sprintf("%s ready=%v at %v%s", p.id, ok, time.Since(b.started).Round(100*time.Millisecond), why))
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

// rotate puts p in the balancer's rotation or takes it out, whatever its /readyz.
// rotate puts p in rotation or takes it out. Taken out, it gets no new request, and rotate
// returns once the requests in flight to it have ended (within 5 s), as a balancer drains a
// node before it is stopped.
func (b *balancer) rotate(p *proc, in bool) {
	i := slices.Index(b.nodes, p)
	b.out[i].Store(!in)
	for deadline := time.Now().Add(5 * time.Second); !in && b.busy[i].Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// take picks the node a request goes to and counts it in flight there (busy); a node taken
// out of rotation as it was picked is picked again, so that rotate sees every request
// that went to it.
func (b *balancer) take() int {
	for range 3 {
		i := b.pick()
		b.busy[i].Add(1)
		if !b.out[i].Load() {
			return i
		}
		b.busy[i].Add(-1)
	}
	i := b.pick() // every node out: pick sends where it can
	b.busy[i].Add(1)
	return i
}

func (b *balancer) close() {
	close(b.stop)
	b.done.Wait()
	for _, t := range b.targets {
		t.Close()
	}
}

func (b *balancer) pick() int {
	n := uint64(len(b.targets))
	start := b.next.Add(1)
	for k := range n {
		if i := (start + k) % n; b.ready[i].Load() && !b.out[i].Load() {
			return int(i)
		}
	}
	for k := range n {
		if i := (start + k) % n; !b.out[i].Load() {
			return int(i)
		}
	}
	return int(start % n)
}

// send sends one request to the node pick chooses, and notes it when it fails: when (since
// the balancer started), to which node, what, how it failed and after how long.
func (b *balancer) send(op, key string, do func(t *loadgen.HTTPTarget) loadgen.Kind) loadgen.Kind {
	i := b.take()
	defer b.busy[i].Add(-1)
	sent := time.Now()
	k := do(b.targets[i])
	if k.IsError() {
		b.mu.Lock()
		if len(b.errs) < maxErrLog {
			at := sent.Sub(b.started)
			b.errs = append(b.errs, failedReq{at: at, node: b.nodes[i].id, kind: k,
				text: fmt.Sprintf("at %v: %s %s to %s: %s after %v", at.Round(100*time.Millisecond), op, key, b.nodes[i].id, k, time.Since(sent).Round(time.Millisecond))})
		}
		b.mu.Unlock()
	}
	return k
}

func (b *balancer) Get(ctx context.Context, conn int, key string) loadgen.Kind {
	return b.send("get", key, func(t *loadgen.HTTPTarget) loadgen.Kind { return t.Get(ctx, conn, key) })
}

func (b *balancer) Put(ctx context.Context, conn int, key string, value []byte) loadgen.Kind {
	return b.send("put", key, func(t *loadgen.HTTPTarget) loadgen.Kind { return t.Put(ctx, conn, key, value) })
}

func (b *balancer) Delete(ctx context.Context, conn int, key string) loadgen.Kind {
	return b.send("delete", key, func(t *loadgen.HTTPTarget) loadgen.Kind { return t.Delete(ctx, conn, key) })
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
// with want in it, and returns the line and when the kvctl run that printed it started (0
// when not within d). The start, not the end: on a busy machine a kvctl process takes
// seconds to start, dial and print (11.5 s named against a 10 s bound at load 20), and that
// delay is the observer's, not the cluster's.
func (c *tcluster) grayNamed(via *proc, id, want string, d time.Duration) (string, time.Duration) {
	line, took, _ := c.grayNoted(via, id, want, "", d)
	return line, took
}

// notedLine is a line of kvctl status and when the kvctl run that printed it started.
type notedLine struct {
	line string
	took time.Duration
}

// grayNoted is grayNamed, and notes the first "note: id ..." line with note in it (kvctl
// status's note of a node that came back) seen before (none when note is "").
func (c *tcluster) grayNoted(via *proc, id, want, note string, d time.Duration) (string, time.Duration, notedLine) {
	start := time.Now()
	var noted notedLine
	for time.Since(start) < d {
		asked := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		out, _ := c.kvctlCmd(ctx, via, "status").Output()
		cancel()
		for _, l := range strings.Split(string(out), "\n") {
			if note != "" && noted.line == "" && strings.HasPrefix(l, "note: "+id+" ") && strings.Contains(l, note) {
				noted = notedLine{l, asked.Sub(start)}
			}
			if strings.HasPrefix(l, "gray: "+id+" ") && strings.Contains(l, want) {
				if took := time.Since(asked); took > time.Second {
					c.t.Logf("kvctl status took %v to print %s gray", took.Round(100*time.Millisecond), id)
				}
				return l, asked.Sub(start), noted
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return "", 0, noted
}

// nodeInfo is node p's NodeInfo, asked with 3 s to answer (a node that is down does not).
func (c *tcluster) nodeInfo(p *proc) (*kvpb.NodeInfoResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return c.admin(p).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
}

// logLinks logs each node's view of its links (NodeInfo.links).
func (c *tcluster) logLinks(nodes ...*proc) {
	for _, p := range nodes {
		info, err := c.nodeInfo(p)
		if err != nil {
			c.t.Logf("%s links: %v", p.id, err)
			continue
		}
		var parts []string
		for _, l := range info.GetLinks() {
			parts = append(parts, fmt.Sprintf("%s %d calls %d failed %d late mean %.1fms fastest %.1fms flaps %d, %d of %d segments retransmitted",
				l.GetPeer(), l.GetCalls(), l.GetFailed(), l.GetLate(), float64(l.GetMeanMicros())/1000, float64(l.GetMinMicros())/1000, l.GetFlaps(),
				l.GetRetransmits(), l.GetSegments()))
		}
		c.t.Logf("%s links: %s", p.id, strings.Join(parts, "; "))
	}
}

// waitNoGray waits up to d until no node answering names any node gray (NodeInfo.gray), and
// returns how long it waited and, when one still was, who named whom.
func (c *tcluster) waitNoGray(d time.Duration) (time.Duration, string) {
	start := time.Now()
	for {
		var still []string
		for _, p := range c.nodes {
			info, err := c.nodeInfo(p)
			if err != nil {
				continue // down (flapping): it names nobody
			}
			for _, g := range info.GetGray() {
				still = append(still, fmt.Sprintf("%s names %s", p.id, strings.TrimPrefix(kvpb.GrayLine(g), "gray: ")))
			}
		}
		if len(still) == 0 {
			return time.Since(start), ""
		}
		if time.Since(start) >= d {
			return time.Since(start), ": " + strings.Join(still, "; ")
		}
		time.Sleep(500 * time.Millisecond)
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

// grayFault is one fault of a drill: on starts it, off ends it; want is the word kvctl
// status must name the gray node with.
type grayFault struct {
	name, want string
	on, off    func()
	// lasts is how long the fault lasts (0: 16 s: 10 s to notice, 6 s to measure); named is
	// how soon kvctl status must name it (0: 10 s). A fault that stops the node does not check its readiness (stopped).
	lasts, named time.Duration
	stops        bool
	// lossyClients: the fault drops the packets of the balancer's own connections to the gray
	// node too (packet loss on the node). A request sent there before the node leaves
	// rotation may wait out TCP's retransmission backoff (200, 400, 800 ms ...) past the
	// client's 2 s timeout: no node can answer a request it did not receive, nor make the
	// client's kernel resend sooner. Such a timeout is logged as the goal missed; any other
	// error fails the drill.
	lossyClients bool
	// note, when set, is what kvctl status must say of the node in a "note:" line within
	// notice (10 s) before it names it want (a restart, before it is flapping).
	note string
	// inRotation: the balancer sends the gray node its share of the load during this fault
	// (and the gap after), as over a lossy node; otherwise the load goes through the others.
	inRotation bool
}

// grayDrill runs a constant-rate mix of quorum writes and reads through lb while each fault
// in turn hurts node gray for faultFor, then checks that kvctl status (through via) named it
// within 10 s with the fault's word, that it left readiness, that lb's other nodes never
// found themselves gray, that it is ready again afterwards, and that no acknowledged write
// is lost. It logs p50/p99/max and errors before, during (the first 10 s apart) and after.
func grayDrill(t *testing.T, c *tcluster, lb *balancer, via, gray *proc, prefix string, faults []grayFault) {
	t.Helper()
	const (
		before = 8 * time.Second
		notice = 10 * time.Second
		gap    = 6 * time.Second
	)
	lasts := func(f grayFault) time.Duration {
		if f.lasts > 0 {
			return f.lasts
		}
		return 16 * time.Second
	}
	if len(faults) > 0 {
		lb.rotate(gray, faults[0].inRotation)
	}
	acks := newAckLog(t)
	cfg := loadgen.DefaultConfig()
	cfg.Rate, cfg.Connections, cfg.Warmup = 200, 32, 0
	// The load runs until the last fault's gap ends (it is stopped then): each fault waits,
	// besides, until no node is gray.
	cfg.Duration = time.Hour
	cfg.Workload = loadgen.Mix{Get: 50, Put: 50}
	cfg.Keys, cfg.KeyDist = 10_000_000, loadgen.KeyDist{Kind: loadgen.DistSequential}
	cfg.KeyPrefix = prefix
	cfg.MaxErrors, cfg.MaxLag = 1, time.Hour // a drill measures what the cluster does, whatever it is
	cfg.KeepIntervals, cfg.OnAck = true, acks.ack

	type outcome struct {
		r   *loadgen.Result
		err error
	}
	ran := make(chan outcome, 1)
	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	start := time.Now()
	t.Logf("the load starts %v after the balancer (its times of errors and readiness count from it)", start.Sub(lb.started).Round(100*time.Millisecond))
	go func() {
		r, err := loadgen.Run(loadCtx, cfg, lb)
		ran <- outcome{r, err}
	}()
	phases := []*drillPhase{{name: "before", from: 3 * time.Second, to: before}}
	at := before
	type named struct {
		fault, line string
		took        time.Duration
	}
	var names []named
	var lossy [][2]time.Duration // when faults with lossyClients were on, balancer time
	for k, f := range faults {
		faultFor, within := lasts(f), f.named
		if within == 0 {
			within = notice
		}
		time.Sleep(time.Until(start.Add(at)))
		// Each fault is named by its own rule: not by a verdict the one before left held
		// (a verdict holds 15 s after it was last drawn), nor with that verdict's kind.
		if waited, still := c.waitNoGray(45 * time.Second); waited > 0 || still != "" {
			t.Logf("%s: waited %v for no node to be gray before it%s", f.name, waited.Round(100*time.Millisecond), still)
			if still != "" {
				t.Errorf("%s: a node was still gray 45 s after the fault before it ended: %s", f.name, still)
			}
			at = time.Since(start)
		}
		load := loadAvg()
		if k == 0 {
			// A healthy cluster under the drill's load names nobody.
			for i, p := range lb.nodes {
				if g := lb.grayOut[i].Load(); g > 0 {
					t.Errorf("%s found itself gray %d times before any fault", p.id, g)
				}
			}
		}
		lb.rotate(gray, f.inRotation)
		f.on()
		faultAt := time.Now()
		if f.lossyClients {
			lossy = append(lossy, [2]time.Duration{faultAt.Sub(lb.started), faultAt.Add(lasts(f)).Sub(lb.started)})
		}
		peek := time.AfterFunc(5*time.Second, func() { c.logLinks(c.nodes...) })
		line, took, noted := c.grayNoted(via, gray.id, f.want, f.note, within+5*time.Second)
		peek.Stop()
		names = append(names, named{f.name, line, took})
		if f.note != "" {
			t.Logf("%s: kvctl status noted %s after %v: %q", f.name, gray.id, noted.took.Round(100*time.Millisecond), noted.line)
			names = append(names, named{f.name + " (note)", noted.line, noted.took})
			switch {
			case noted.line == "":
				t.Errorf("%s: kvctl status did not note %s %q before it named it %q", f.name, gray.id, f.note, f.want)
			case noted.took > notice:
				t.Errorf("%s: kvctl status noted %s %q after %v, want within %v", f.name, gray.id, f.note, noted.took, notice)
			}
		}
		unreadyAt, reason := time.Duration(0), ""
		// One verdict: what /readyz says of the node is what kvctl status says. Each node
		// draws its own from views swapped once a second, so the node may say another kind
		// for a look after kvctl status named it: the last of the window's answers counts.
		mine := "gray: " + gray.id + " "
		// At least one look: kvctl status may have taken the whole window.
		for look := 0; (look == 0 || time.Since(faultAt) < min(15*time.Second, faultFor-time.Second)) && !f.stops; look++ {
			if code, body, err := request(http.MethodGet, "http://"+gray.admin+"/readyz", nil); err == nil && code == http.StatusServiceUnavailable {
				if unreadyAt == 0 {
					unreadyAt = time.Since(faultAt)
				}
				if reason = strings.TrimSpace(body); !strings.Contains(reason, mine) || strings.Contains(reason, mine+f.want) ||
					time.Since(faultAt) >= took+2*time.Second {
					break
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		c.logLinks(c.nodes...)
		t.Logf("%s (load %s, at %v of the load): kvctl status named %s after %v: %q; %s unready after %v: %q",
			f.name, load, faultAt.Sub(start).Round(100*time.Millisecond), gray.id, took.Round(100*time.Millisecond), line, gray.id, unreadyAt.Round(100*time.Millisecond), reason)
		switch {
		case line == "":
			t.Errorf("%s: kvctl status did not name %s %q within %v", f.name, gray.id, f.want, within+5*time.Second)
		case took > within:
			t.Errorf("%s: kvctl status named %s after %v, want within %v", f.name, gray.id, took, within)
		}
		if unreadyAt == 0 && !f.stops {
			t.Errorf("%s: %s's /readyz still 200 after %v", f.name, gray.id, min(15*time.Second, faultFor-time.Second))
		}
		if strings.Contains(reason, mine) && !strings.Contains(reason, mine+f.want) {
			t.Errorf("%s: %s's /readyz says %q, kvctl status %q", f.name, gray.id, reason, line)
		}
		phases = append(phases,
			&drillPhase{name: f.name + ", first 10s", from: at, to: at + notice},
			&drillPhase{name: f.name + ", after 10s", from: at + notice, to: at + faultFor})
		time.Sleep(time.Until(start.Add(at + faultFor)))
		f.off()
		phases = append(phases, &drillPhase{name: "after " + f.name, from: at + faultFor + 2*time.Second, to: at + faultFor + gap})
		at += faultFor + gap
	}
	time.Sleep(time.Until(start.Add(at)))
	stopLoad()
	o := <-ran
	if o.err != nil {
		t.Fatalf("load: %v", o.err)
	}
	cutPhases(o.r, phases)
	var via2 []string
	for _, p := range lb.nodes {
		via2 = append(via2, p.id)
	}
	t.Logf("drill, load average %s, %.0f req/s mixed get=50,put=50 at quorum through %s by /readyz (%s only while the fault allows):",
		loadAvg(), cfg.Rate, strings.Join(via2, ", "), gray.id)
	for _, p := range phases {
		t.Logf("  %s", p)
	}
	// 0 errors at quorum, through each fault and after it. When the load failed requests
	// before any fault, the machine (not the fault) fails them, and the faults' errors say
	// nothing: logged, not judged. Otherwise every failed request fails the drill, but a
	// timeout of one sent to the gray node while its own connections lost packets
	// (lossyClients): that is logged as the goal missed.
	failed, errs := lb.failed(), int64(0)
	for _, p := range phases {
		errs += p.errs
	}
	switch {
	case phases[0].errs > 0:
		t.Logf("errors not judged: %d before any fault (the machine is saturated: load %s)", phases[0].errs, loadAvg())
	case errs > int64(len(failed)):
		t.Errorf("%d errors at quorum, more than the %d the balancer lists; want 0", errs, len(failed))
	default:
		for _, e := range failed {
			onLossy := false
			for _, w := range lossy {
				onLossy = onLossy || e.at >= w[0] && e.at < w[1]
			}
			if e.node == gray.id && e.kind == loadgen.KindTimeout && onLossy {
				t.Logf("goal missed (0 errors), not failed: a request on the client's own lossy connection to %s, before it left rotation: %s", gray.id, e.text)
				continue
			}
			t.Errorf("an error at quorum, want 0: %s", e.text)
		}
	}
	for _, iv := range o.r.Intervals {
		t.Logf("  second %3.0f: %4d req %3d err p99 %7.1fms max %7.1fms", iv.Start.Seconds(), iv.Requests, iv.Errors,
			float64(iv.P99.Microseconds())/1000, float64(iv.Max.Microseconds())/1000)
	}
	t.Logf("readiness changes seen by the balancer: %s", strings.Join(lb.flips(), "; "))
	for _, e := range lb.failed() {
		t.Logf("  failed %s", e.text)
	}
	for _, n := range names {
		t.Logf("  named: %s: after %v: %q", n.fault, n.took.Round(100*time.Millisecond), n.line)
	}
	for i, p := range lb.nodes {
		t.Logf("%s failed %d health checks, %d of them as gray", p.id, lb.unready[i].Load(), lb.grayOut[i].Load())
		if g := lb.grayOut[i].Load(); g > 0 && p != gray {
			t.Errorf("%s found itself gray %d times: a healthy node was taken out", p.id, g)
		}
	}
	waitFor(t, 90*time.Second, gray.id+" ready again once the faults end", func() error {
		if code := readyz(gray); code != http.StatusOK {
			return fmt.Errorf("%s /readyz %d", gray.id, code)
		}
		return nil
	})
	acks.close(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := c.kvctl(ctx, via, "bench", "check", acks.path, "--ack", "2", "--from", "3")
	t.Logf("%d acknowledged writes: %s", acks.n, strings.TrimSpace(res.stdout))
	if res.code != 0 {
		t.Errorf("kvctl bench check: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// delayProxy forwards TCP connections from its address to target, holding every chunk
// half the delay in each direction (so a round trip takes delay more) without slowing
// the throughput. The delay can change while connections are open. It runs in a process
// of its own (this test binary, runDelayProxy): in the test's process, race-instrumented
// and busy with the load, every chunk waited for a turn, 13-35 ms at a load average of
// 8-15 where the direct links took 1-3 ms, which is a slow link: n3 was named gray with
// no fault on and stayed so after the faults ended.
type delayProxy struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// delayProxyEnv, set to "ADDR TARGET", makes the test binary a delayProxy (TestMain): it
// reads delays in nanoseconds, one a line, on its stdin and exits when stdin closes.
const delayProxyEnv = "RINGKV_TEST_DELAY_PROXY"

func newDelayProxy(t *testing.T, addr, target string) *delayProxy {
	t.Helper()
	exe, err := os.Executable()
	must(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), delayProxyEnv+"="+addr+" "+target)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	p := &delayProxy{cmd: cmd, stdin: stdin}
	t.Cleanup(p.close)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "listening" {
		t.Fatalf("delay proxy %s -> %s: %q %v", addr, target, line, err)
	}
	return p
}

func (p *delayProxy) set(d time.Duration) {
	if _, err := fmt.Fprintln(p.stdin, int64(d)); err != nil {
		panic(fmt.Sprintf("delay proxy: %v", err))
	}
}

func (p *delayProxy) close() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// runDelayProxy is the delay proxy's process: spec is "ADDR TARGET".
func runDelayProxy(spec string) {
	addr, target, _ := strings.Cut(spec, " ")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "delay proxy:", err)
		os.Exit(1)
	}
	var delay atomic.Int64
	fmt.Println("listening")
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			go delayPipe(&delay, out, in)
			go delayPipe(&delay, in, out)
		}
	}()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if d, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64); err == nil {
			delay.Store(d)
		}
	}
	os.Exit(0) // stdin closed: the test ended (or died)
}

// delayPipe copies from src to dst, each chunk sent half the delay after it was read.
func delayPipe(delay *atomic.Int64, dst, src net.Conn) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	q := make(chan chunk, 1024)
	go func() {
		defer dst.Close()
		for c := range q {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.b); err != nil {
				return
			}
		}
	}()
	defer close(q)
	for {
		b := make([]byte, 32<<10)
		n, err := src.Read(b)
		if n > 0 {
			q <- chunk{time.Now().Add(time.Duration(delay.Load() / 2)), b[:n]}
		}
		if err != nil {
			return
		}
	}
}

// TestGrayNetwork: n3's network goes gray in turn, each fault 16 s with 6 s between, under
// one load. Lossy: 5% and then 20% of its packets dropped, with the load spread over all
// three nodes by a balancer that health-checks /readyz: n3 must find itself the odd one out
// and leave readiness while n1 and n2 stay ready. Slow links: its peers reach it through a
// proxy that adds 50 ms, then 200 ms, the load through the healthy nodes n1 and n2. Each
// time kvctl status must name n3 and the fault within 10 s, and no acknowledged write may be
// lost. The one-way cuts are TestGrayCuts, in a cluster of their own beside it.
func TestGrayNetwork(t *testing.T) {
	grayNeeds(t)
	t.Parallel()
	var proxy *delayProxy
	c := grayCluster(t, 0, nil, nil, func(p *proc) {
		if p.id == "n3" {
			p.advertise = freeAddr(t)
			proxy = newDelayProxy(t, p.advertise, p.grpc)
		}
	})
	n1, n3 := c.node("n1"), c.node("n3")
	ipt := newPacketLoss(t, 0)
	lb := newBalancer([]*proc{n1, c.node("n2"), n3}, 32)
	defer lb.close()
	var faults []grayFault
	for _, share := range []float64{0.05, 0.20} {
		name := fmt.Sprintf("%.0f%% loss on n3", 100*share)
		faults = append(faults, grayFault{name: name, want: "lossy", inRotation: true, lossyClients: true,
			on: func() { ipt.set(share) },
			off: func() {
				t.Logf("%s: %s", name, ipt.dropped())
				ipt.set(0)
			}})
	}
	for _, d := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond} {
		faults = append(faults, grayFault{name: fmt.Sprintf("+%v on n3's links", d), want: "slow links",
			on: func() { proxy.set(d) }, off: func() { proxy.set(0) }})
	}
	grayDrill(t, c, lb, n1, n3, "gray-net:", faults)
}

// TestGrayCuts: n3 cut one way, each cut 16 s with 6 s between, under one load through the
// healthy nodes n1 and n2: its inbound gRPC cut (it reaches its peers, they cannot reach it),
// then its outbound (the reverse). Readiness must say which side is cut, kvctl status must
// name n3 and the cut within 10 s, the ring metadata must not split, and no acknowledged
// write may be lost.
func TestGrayCuts(t *testing.T) {
	grayNeeds(t)
	t.Parallel()
	c := grayCluster(t, 2, nil, nil, nil)
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	ipt := newPacketLoss(t, 2)
	port := func(addr string) string {
		_, p, err := net.SplitHostPort(addr)
		must(t, err)
		return p
	}
	lb := newBalancer([]*proc{n1, n2, n3}, 32)
	defer lb.close()
	faults := []grayFault{
		{name: "n3 inbound cut", want: "unreachable from its peers",
			on:  func() { ipt.rules([]string{"-p", "tcp", "--dport", port(n3.grpc), "-j", "DROP"}) },
			off: func() { ipt.rules() }},
		{name: "n3 outbound cut", want: "cut off from its peers",
			on: func() {
				uid := fmt.Sprint(ipt.uid)
				ipt.rules(
					[]string{"-m", "owner", "--uid-owner", uid, "-p", "tcp", "--dport", port(n1.grpc), "-j", "DROP"},
					[]string{"-m", "owner", "--uid-owner", uid, "-p", "tcp", "--dport", port(n2.grpc), "-j", "DROP"})
			},
			off: func() { ipt.rules() }},
	}
	grayDrill(t, c, lb, n1, n3, "gray-cut:", faults)
	// One ring for all: no node took its own view of the metadata during the cuts.
	epochs := map[uint64][]string{}
	for _, p := range c.nodes {
		st := c.statusOf(p)
		epochs[st.GetEpoch()] = append(epochs[st.GetEpoch()], p.id)
	}
	if len(epochs) != 1 {
		t.Errorf("ring epochs differ after the cuts: %v", epochs)
	}
}

// TestGrayDiskAndFlapping: every node with --sync-writes. Slow disk: n3's data lies on a loop
// device whose writes a blkio cgroup caps, 10x slower fsyncs, for 16 s with the load spread
// over all three nodes by /readyz: kvctl status must name it "slow disk" within 10 s and it
// must leave readiness. Flapping: n3 stopped (SIGKILL) and started every 5 s for 30 s, the
// load through n1 and n2: kvctl status must name it flapping once it is gone the second time
// (one restart is not flapping), n1 and n2 must stay ready with no error storm, and once it
// settles it must serve again. No acknowledged write may be lost.
func TestGrayDiskAndFlapping(t *testing.T) {
	grayNeeds(t)
	t.Parallel()
	var faults []grayFault
	// Every node's data on the host's disk, n3's writes to it throttled for the fault.
	disk, err := newSlowDisk(t, grayUID(1))
	var dirs map[string]string
	if err != nil {
		t.Logf("no slow disk drill, the machine cannot slow a disk: %v", err)
	} else {
		host := hostDir(t, 0)
		dirs = map[string]string{"n1": filepath.Join(host, "n1"), "n2": filepath.Join(host, "n2"), "n3": disk.data()}
	}
	c := grayCluster(t, 1, []string{"--sync-writes"}, dirs, nil)
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	lb := newBalancer([]*proc{n1, n2, n3}, 32)
	defer lb.close()
	if disk != nil {
		disk.join(n3.cmd.Process.Pid)
		faults = append(faults, grayFault{name: "n3's disk 10x slower", want: "slow disk", inRotation: true,
			on: func() {
				peers := c.storeMs(n1, n2)
				iops := slowDiskIOPS(peers)
				t.Logf("n3's disk capped at %d writes/s (its peers' own writes: %.1f ms on average)", iops, peers)
				disk.limit(iops)
			}, off: func() { disk.limit(0) }})
	}
	stop := make(chan struct{})
	var flapping sync.WaitGroup
	faults = append(faults, grayFault{name: "n3 flapping", want: "flapping", lasts: 30 * time.Second, stops: true,
		// It flaps from its second departure, 10 s in: one restart is not flapping, and
		// nothing tells the two apart sooner. Its peers count the departure as the reconnect
		// is refused and tell each other at once; the 2 s beyond are for kvctl status itself,
		// which takes that long to run on a loaded machine (2.3 s at a load average of 47).
		named: 12 * time.Second,
		// Its first comeback, 5 s in, is noted at once: a restart, which alone keeps it
		// ready (TestRestartedReadyWhenReached), and flapping if it goes again.
		note: "restarted",
		on: func() {
			flapping.Go(func() {
				for {
					c.kill(n3)
					select {
					case <-stop:
						c.restart(n3)
						return
					case <-time.After(5 * time.Second):
					}
					c.restart(n3)
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Second):
					}
				}
			})
		},
		off: func() {
			close(stop)
			flapping.Wait()
		}})
	grayDrill(t, c, lb, n1, n3, "gray-disk:", faults)
	for _, p := range []*proc{n1, n2} {
		info, err := c.admin(p).NodeInfo(context.Background(), &kvpb.NodeInfoRequest{})
		must(t, err)
		for _, b := range info.GetBreakers() {
			t.Logf("%s's breaker to %s: %s, %d consecutive failures", p.id, b.GetPeer(), b.GetState(), b.GetConsecutiveFailures())
		}
	}
}

// slowDiskIOPS is the cap on the slow disk's writes per second that makes n3's writes ten
// times slower than its peers' (peersMs on average, by their own figures), 100 at the
// most: an fsync of badger's (data and the file system's journal) took 1 ms on this
// machine's disk and ~30 ms at that cap (a 4 KiB O_DSYNC write is three writes to the disk).
// A machine short of CPU slows every node's store (15-28 ms a write beside three spin
// loops, the disk idle), and then 30 ms is no slow disk beside them: the cap is what makes
// it ten times theirs. Beside two spin loops the peers' writes took 0.7 ms and the cap
// stayed 100.
func slowDiskIOPS(peersMs float64) int {
	if peersMs <= 3 {
		return 100
	}
	return max(int(3000/(10*peersMs)), 2)
}

// storeMs is the slower of nodes' own stores' mean write (their self links), in ms.
func (c *tcluster) storeMs(nodes ...*proc) float64 {
	slowest := 0.0
	for _, p := range nodes {
		info, err := c.nodeInfo(p)
		if err != nil {
			continue
		}
		for _, l := range info.GetLinks() {
			if l.GetPeer() == p.id {
				slowest = max(slowest, float64(l.GetMeanMicros())/1000)
			}
		}
	}
	return slowest
}
