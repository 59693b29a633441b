package test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"ringkv/proto/kvpb"
)

// bins are the kvnode and kvctl binaries, built once for the package.
type bins struct {
	kvnode, kvctl string
}

var (
	binsOnce sync.Once
	binsVal  bins
	binsErr  error
)

// buildBins builds kvnode and kvctl once per test binary into a directory of the first
// caller's; later callers reuse them.
func buildBins(t *testing.T) bins {
	t.Helper()
	binsOnce.Do(func() {
		dir, err := mkdirTemp()
		if err != nil {
			binsErr = err
			return
		}
		binsVal = bins{kvnode: filepath.Join(dir, "kvnode"), kvctl: filepath.Join(dir, "kvctl")}
		// One go build for both: their packages compile side by side. Built as
		// deploy/image.sh builds the image's (static, -trimpath): the binaries as shipped,
		// and test.sh's other builds (vet, this package, the image) share their compile.
		cmd := exec.Command("go", "build", "-trimpath", "-o", dir+"/", "ringkv/cmd/kvnode", "ringkv/cmd/kvctl")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			binsErr = fmt.Errorf("go build kvnode and kvctl: %v\n%s", err, b)
		}
	})
	if binsErr != nil {
		t.Fatal(binsErr)
	}
	return binsVal
}

// tcluster is a set of kvnode processes: founders started with --peers, the others empty,
// awaiting admission.
type tcluster struct {
	t        *testing.T
	bins     bins
	peers    string
	founders int
	replicas int // the replication factor (--replicas, 3 by default)
	nodes    []*proc
	alive    map[*proc]bool
	conns    map[string]*grpc.ClientConn
	mu       sync.Mutex
	// runs numbers the traffic runs, so each writes keys of its own.
	runs atomic.Int64
}

// startCluster starts founders nodes n1..nF founding the cluster and extra empty nodes.
func startCluster(t *testing.T, founders, extra int) *tcluster {
	t.Helper()
	return startClusterFlags(t, founders, extra, nil)
}

// startClusterFlags is startCluster with extra flags for every kvnode.
func startClusterFlags(t *testing.T, founders, extra int, flags []string) *tcluster {
	t.Helper()
	return startClusterDirs(t, founders, extra, flags, nil)
}

// startClusterDirs is startClusterFlags with the data directories of some nodes chosen
// (dirs: id -> directory; the others get one under a temp dir).
func startClusterDirs(t *testing.T, founders, extra int, flags []string, dirs map[string]string) *tcluster {
	t.Helper()
	return startClusterSetup(t, founders, extra, flags, dirs, nil)
}

// startClusterSetup is startClusterDirs with setup, when set, called on every node before
// the founders' --peers is made and the nodes start (to run one as another user, or behind a
// proxy by its advertise address, say).
func startClusterSetup(t *testing.T, founders, extra int, flags []string, dirs map[string]string, setup func(*proc)) *tcluster {
	t.Helper()
	c := &tcluster{t: t, bins: buildBins(t), founders: founders, replicas: 3, alive: map[*proc]bool{}, conns: map[string]*grpc.ClientConn{}}
	if i := slices.Index(flags, "--replicas"); i >= 0 && i+1 < len(flags) {
		c.replicas, _ = strconv.Atoi(flags[i+1])
	}
	base := t.TempDir()
	var peers []string
	for i := range founders + extra {
		p := &proc{id: fmt.Sprintf("n%d", i+1), grpc: freeAddr(t), http: freeAddr(t), admin: freeAddr(t), flags: flags}
		p.dir = filepath.Join(base, p.id)
		if d, ok := dirs[p.id]; ok {
			p.dir = d
		}
		c.nodes = append(c.nodes, p)
		if setup != nil {
			setup(p)
		}
		if i < founders {
			addr := p.grpc
			if p.advertise != "" {
				addr = p.advertise
			}
			peers = append(peers, p.id+"="+addr)
		}
	}
	c.peers = strings.Join(peers, ",")
	t.Cleanup(func() { c.stopAll(t) })
	for i, p := range c.nodes {
		c.start(p, i < founders)
	}
	for _, p := range c.nodes[:founders] {
		c.waitServing(p)
	}
	return c
}

func (c *tcluster) start(p *proc, founder bool) {
	peers := ""
	if founder {
		peers = c.peers
	}
	p.start(c.t, c.bins.kvnode, peers)
	c.mu.Lock()
	c.alive[p] = true
	c.mu.Unlock()
}

// restart starts a killed node again on its data directory.
func (c *tcluster) restart(p *proc) {
	c.start(p, strings.Contains(c.peers, p.id+"="))
}

// kill sends SIGKILL to p and waits for it to exit.
func (c *tcluster) kill(p *proc) {
	c.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		c.t.Fatalf("kill -9 %s: %v", p.id, err)
	}
	<-p.done
	c.mu.Lock()
	c.alive[p] = false
	c.mu.Unlock()
}

func (c *tcluster) stopAll(t *testing.T) {
	for _, p := range c.nodes {
		c.mu.Lock()
		alive := c.alive[p]
		c.mu.Unlock()
		if !alive {
			continue
		}
		p.terminate(t)
	}
	for _, cc := range c.conns {
		cc.Close()
	}
	if t.Failed() {
		for _, p := range c.nodes {
			t.Logf("--- log of %s (last lines):\n%s", p.id, tail(p.log, 60))
		}
	}
}

// stopWait is how long a node may take to exit after SIGTERM: past kvnode's own line naming
// the stage a stop is stuck in (its --drain-timeout, 10 s, plus 10 s), so that the log holds it.
const stopWait = 25 * time.Second

// terminate sends p SIGTERM and fails t unless p exits with status 0 within stopWait; a p
// that hangs is ended with SIGQUIT and its goroutines in ringkv's code are logged.
func (p *proc) terminate(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM %s: %v", p.id, err)
		return
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("%s exited with %v after SIGTERM, want 0\n%s", p.id, err, tail(p.log, 40))
		}
	case <-time.After(stopWait):
		t.Errorf("%s did not exit within %v of SIGTERM\n%s", p.id, stopWait, tail(p.log, 40))
		t.Logf("%s's goroutines that were in ringkv's code when it hung:\n%s", p.id, quitStacks(p))
	}
}

// quitStacks ends a hung p with SIGQUIT, on which the Go runtime prints every goroutine's
// stack, and returns the stacks that pass through ringkv's own packages.
func quitStacks(p *proc) string {
	before := len(p.log.String())
	p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	var out []string
	for _, g := range strings.Split(p.log.String()[before:], "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && strings.Contains(g, "ringkv/") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// tail returns the last n lines of a process log.
func tail(b fmt.Stringer, n int) string {
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (c *tcluster) node(id string) *proc {
	for _, p := range c.nodes {
		if p.id == id {
			return p
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

func (c *tcluster) conn(p *proc) *grpc.ClientConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.conns[p.grpc]; ok {
		return cc
	}
	cc, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatalf("dial %s: %v", p.id, err)
	}
	c.conns[p.grpc] = cc
	return cc
}

func (c *tcluster) kv(p *proc) kvpb.KVClient       { return kvpb.NewKVClient(c.conn(p)) }
func (c *tcluster) admin(p *proc) kvpb.AdminClient { return kvpb.NewAdminClient(c.conn(p)) }

func (c *tcluster) waitServing(p *proc) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, p.id+" serving", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.kv(p).Put(ctx, &kvpb.PutRequest{Key: []byte("probe-" + p.id), Value: []byte("x"), Ack: uint32(min(c.replicas, c.founders))})
		return err
	})
}

// valueOf is the value the loader writes for key.
func valueOf(key string, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = key[i%len(key)]
	}
	return b
}

// load writes n keys "k000000".. with ack=3 from workers parallel writers over nodes and
// returns their logical size (key + value bytes). ack=3, not ack=1: a replica write that
// times out under an ack=1 load leaves the key on fewer replicas (no hints), and a ring change
// that streams the range from a replica without it would make a prior key unreadable for
// reasons that are not the change's fault.
func (c *tcluster) load(nodes []*proc, n, size, workers int) uint64 {
	c.t.Helper()
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			kv := c.kv(nodes[w%len(nodes)])
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				key := fmt.Sprintf("k%06d", i)
				var err error
				// Retry with a backoff: on a loaded machine a peer's circuit breaker may open
				// for a moment.
				for a := range 8 {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, err = kv.Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: valueOf(key, size)}) // the default quorum
					cancel()
					if err == nil {
						break
					}
					time.Sleep(min(50*time.Millisecond<<a, time.Second))
				}
				if err != nil && failed.Add(1) <= 5 {
					c.t.Errorf("load %s: %v", key, err)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		c.t.Fatalf("load: %d of %d keys not written", failed.Load(), n)
	}
	c.t.Logf("loaded %d keys of %d bytes in %s", n, size, time.Since(start).Round(time.Millisecond))
	return uint64(n) * uint64(len("k000000")+size)
}

// traffic is a writer of ack=2 PUTs and a reader of quorum GETs of prior keys, running
// until stop.
type traffic struct {
	mu       sync.Mutex
	acked    map[string]string
	attempts int
	writeErr map[string]int
	reads    int
	readErr  map[string]int
	// wrong lists reads that returned a wrong value or NotFound for a key known to exist.
	wrong []string
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

// startTraffic runs writers and one reader through nodes (chosen round robin). prior is the
// number of keys load wrote.
func (c *tcluster) startTraffic(nodes []*proc, writers, prior, size int) *traffic {
	return c.startTrafficPaced(nodes, writers, prior, size, 0)
}

// startTrafficPaced is startTraffic whose writers and reader each wait pause after every
// request: a closed loop that does not outnumber the calls a constant-rate load makes (each
// of its workers makes thousands a second while a stopped node runs, one while it is stopped).
func (c *tcluster) startTrafficPaced(nodes []*proc, writers, prior, size int, pause time.Duration) *traffic {
	ctx, stop := context.WithCancel(context.Background())
	tr := &traffic{acked: map[string]string{}, writeErr: map[string]int{}, readErr: map[string]int{}, stop: stop}
	run := c.runs.Add(1)
	for w := range writers {
		tr.wg.Go(func() {
			for seq := 0; ctx.Err() == nil; seq++ {
				key := fmt.Sprintf("w%d-%d-%d", run, w, seq)
				val := "value-" + key
				p := nodes[(seq+w)%len(nodes)]
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				_, err := c.kv(p).Put(rctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte(val), Ack: 2})
				cancel()
				tr.mu.Lock()
				tr.attempts++
				if err == nil {
					tr.acked[key] = val
				} else if ctx.Err() == nil {
					tr.writeErr[status.Code(err).String()]++
				}
				tr.mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // do not spin on a node that is down
				}
				time.Sleep(pause)
			}
		})
	}
	tr.wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for seq := 0; ctx.Err() == nil; seq++ {
			key := fmt.Sprintf("k%06d", rng.IntN(prior))
			p := nodes[seq%len(nodes)]
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			resp, err := c.kv(p).Get(rctx, &kvpb.GetRequest{Key: []byte(key)})
			cancel()
			tr.mu.Lock()
			tr.reads++
			switch {
			case err == nil && !bytes.Equal(resp.GetValue(), valueOf(key, size)):
				tr.wrong = append(tr.wrong, fmt.Sprintf("%s via %s: got %q", key, p.id, trunc(resp.GetValue())))
			case status.Code(err) == codes.NotFound:
				tr.wrong = append(tr.wrong, fmt.Sprintf("%s via %s: not found", key, p.id))
			case err != nil && ctx.Err() == nil:
				tr.readErr[status.Code(err).String()]++
			}
			tr.mu.Unlock()
			if err != nil {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(pause)
		}
	})
	return tr
}

func trunc(b []byte) string {
	if len(b) > 16 {
		return string(b[:16]) + "..."
	}
	return string(b)
}

// finish stops the traffic and returns a copy of the acknowledged writes.
func (tr *traffic) finish(t *testing.T) map[string]string {
	t.Helper()
	tr.stop()
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t.Logf("traffic: %d of %d ack=2 writes acknowledged (errors %v); %d quorum reads (errors %v, wrong %d)",
		len(tr.acked), tr.attempts, tr.writeErr, tr.reads, tr.readErr, len(tr.wrong))
	for i, w := range tr.wrong {
		if i == 10 {
			break
		}
		t.Errorf("read during the change: %s, want the loaded value", w)
	}
	out := make(map[string]string, len(tr.acked))
	for k, v := range tr.acked {
		out[k] = v
	}
	return out
}

func (tr *traffic) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.acked)
}

func (tr *traffic) errors() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, v := range tr.writeErr {
		n += v
	}
	for _, v := range tr.readErr {
		n += v
	}
	return n
}

// checkReads reads every prior key and every acknowledged write with the default quorum,
// each through one node in turn, and a sample of sample prior keys through every node.
func (c *tcluster) checkReads(nodes []*proc, prior, size int, acked map[string]string, sample int) {
	c.t.Helper()
	start := time.Now()
	type job struct {
		key  string
		want []byte
		via  *proc
	}
	jobs := make(chan job, 256)
	var missing atomic.Int64
	var mu sync.Mutex
	var examples []string
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for j := range jobs {
				var resp *kvpb.GetResponse
				var err error
				for range 3 { // a transient Unavailable is retried; a wrong answer is not
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					resp, err = c.kv(j.via).Get(ctx, &kvpb.GetRequest{Key: []byte(j.key)})
					cancel()
					if err == nil || status.Code(err) == codes.NotFound {
						break
					}
				}
				if err != nil || !bytes.Equal(resp.GetValue(), j.want) {
					missing.Add(1)
					mu.Lock()
					if len(examples) < 10 {
						examples = append(examples, fmt.Sprintf("GET %s via %s: got %q (err %v), want %q", j.key, j.via.id, trunc(resp.GetValue()), err, trunc(j.want)))
					}
					mu.Unlock()
				}
			}
		})
	}
	total := 0
	for i := range prior {
		key := fmt.Sprintf("k%06d", i)
		jobs <- job{key, valueOf(key, size), nodes[i%len(nodes)]}
		total++
		if i < sample {
			for k, p := range nodes {
				if k != i%len(nodes) {
					jobs <- job{key, valueOf(key, size), p}
					total++
				}
			}
		}
	}
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		for j, p := range nodes {
			if i < sample || j == i%len(nodes) {
				jobs <- job{k, []byte(acked[k]), p}
				total++
			}
		}
	}
	close(jobs)
	wg.Wait()
	for _, e := range examples {
		c.t.Error(e)
	}
	if n := missing.Load(); n > 0 {
		c.t.Fatalf("%d of %d quorum reads did not return the written value", n, total)
	}
	c.t.Logf("checked %d quorum reads (%d prior keys, %d acknowledged writes, %d of each through every node) in %s",
		total, prior, len(acked), sample, time.Since(start).Round(time.Millisecond))
}

// kvctlResult is one run of the kvctl binary.
type kvctlResult struct {
	stdout, stderr string
	code           int
}

// kvctl runs the kvctl binary against node p and waits for it.
func (c *tcluster) kvctl(ctx context.Context, p *proc, args ...string) kvctlResult {
	cmd := c.kvctlCmd(ctx, p, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("run kvctl %v: %v", args, err)
	}
	c.t.Logf("kvctl %s -> exit %d", strings.Join(args, " "), code)
	return kvctlResult{out.String(), errOut.String(), code}
}

func (c *tcluster) kvctlCmd(ctx context.Context, p *proc, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, c.bins.kvctl, append([]string{"--addr", p.grpc}, args...)...)
}

// recordedBench is a kvctl bench of ack=2 PUTs of new sequential keys, each acknowledged
// write recorded (--record) for kvctl bench check, running in the background.
type recordedBench struct {
	cmd         *exec.Cmd
	out, errOut bytes.Buffer
	done        chan error
	ended       bool
}

// startRecordedBench starts a bench through via at rate PUTs/s over conns connections for
// duration, recording into record; the test's end kills it if it still runs.
func (c *tcluster) startRecordedBench(via *proc, record string, rate, duration string, conns int) *recordedBench {
	c.t.Helper()
	b := &recordedBench{done: make(chan error, 1)}
	b.cmd = c.kvctlCmd(context.Background(), via, "bench", "--rate", rate, "--duration", duration, "--warmup", "0s",
		"--workload", "put", "--key-dist", "sequential", "--keys", "1000000", "--value-size", "64",
		"--ack", "2", "--from", "3", "--record", record, "--max-errors", "100", "--connections", fmt.Sprint(conns))
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.errOut
	if err := b.cmd.Start(); err != nil {
		c.t.Fatalf("start bench: %v", err)
	}
	go func() { b.done <- b.cmd.Wait() }()
	c.t.Cleanup(func() {
		if !b.ended {
			b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

// wait waits up to d for the bench to end (after interrupt, or its duration).
func (b *recordedBench) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-b.done:
		b.ended = true
	case <-time.After(d):
		t.Fatalf("bench did not end\n%s", b.errOut.String())
	}
}

// interrupt stops the bench as Ctrl-C does: it reports what it did and closes its record.
func (b *recordedBench) interrupt() { b.cmd.Process.Signal(os.Interrupt) }

// progressOf decodes kvctl's -o json result.
func progressOf(t *testing.T, r kvctlResult) *kvpb.ChangeProgress {
	t.Helper()
	p := &kvpb.ChangeProgress{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(r.stdout), p); err != nil {
		t.Fatalf("decode kvctl result %q: %v\nstderr:\n%s", r.stdout, err, r.stderr)
	}
	return p
}

// ringOf returns p's Ring with counts.
func (c *tcluster) ringOf(p *proc) *kvpb.RingResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.admin(p).Ring(ctx, &kvpb.RingRequest{WithCounts: true})
	if err != nil {
		c.t.Fatalf("ring of %s: %v", p.id, err)
	}
	return r
}

func ownershipOf(r *kvpb.RingResponse, id string) *kvpb.NodeOwnership {
	for _, o := range r.GetOwnership() {
		if o.GetId() == id {
			return o
		}
	}
	return nil
}

// streamedBytes sums what the receivers report having streamed for the last change (their
// local progress, counted by each receiver's mover since it started). failedOver is the part
// of bytes in ranges pulled from another replica than the move's source, or whose source is
// one of killed: a source that stays unreachable has its range pulled from each other
// replica in turn (their union holds every acknowledged write), and a pull that fails there
// starts again from where the source stopped, so those bytes come more than once by design.
func (c *tcluster) streamedBytes(receivers []*proc, killed ...*proc) (keys, bytes, failedOver uint64) {
	c.t.Helper()
	for _, p := range receivers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		lp, err := c.admin(p).ChangeStatus(ctx, &kvpb.ChangeStatusRequest{Local: true})
		cancel()
		if err != nil {
			c.t.Fatalf("local progress of %s: %v", p.id, err)
		}
		for _, r := range lp.GetRanges() {
			keys += r.GetKeysDone()
			bytes += r.GetBytesDone()
			src := r.GetMove().GetSource()
			if from := r.GetPullingFrom(); from != "" && from != src || slices.ContainsFunc(killed, func(k *proc) bool { return k.id == src }) {
				failedOver += r.GetBytesDone()
			}
		}
	}
	return keys, bytes, failedOver
}

// waitEpochEverywhere waits until every node in nodes routes by epoch at least epoch.
func (c *tcluster) waitEpochEverywhere(nodes []*proc, epoch uint64) {
	c.t.Helper()
	for _, p := range nodes {
		waitFor(c.t, 30*time.Second, p.id+" at epoch", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			info, err := c.admin(p).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
			if err != nil {
				return err
			}
			if info.GetEpoch() < epoch {
				return fmt.Errorf("epoch %d, want %d", info.GetEpoch(), epoch)
			}
			return nil
		})
	}
}

// leader returns the founder that leads raft.
func (c *tcluster) leader(among []*proc) *proc {
	c.t.Helper()
	var found *proc
	waitFor(c.t, 20*time.Second, "a raft leader", func() error {
		for _, p := range among {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			info, err := c.admin(p).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
			cancel()
			if err == nil && info.GetRaftRole() == kvpb.RaftRole_RAFT_ROLE_LEADER {
				found = p
				return nil
			}
		}
		return errors.New("no node says leader")
	})
	return found
}

// changeStatus returns the change progress as p sees it.
func (c *tcluster) changeStatus(p *proc) (*kvpb.ChangeProgress, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.admin(p).ChangeStatus(ctx, &kvpb.ChangeStatusRequest{})
}

// long skips t under -short: a case of tens of seconds, which ./test.sh without -short (and
// so .ci/run) runs.
func long(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("tens of seconds of kvnode processes: runs without -short (./test.sh, .ci/run)")
	}
}

func mkdirTemp() (string, error) { return os.MkdirTemp("", "ringkv-test-bins-") }

// parallel is how many cases run side by side when -test.parallel is not given (its default,
// GOMAXPROCS, is 2 on a 2-core machine): the cases mostly wait (on fault windows, paced
// streams, constant-rate loads), so more of them than cores keeps the cores busy.
const parallel = 6

func TestMain(m *testing.M) {
	if spec := os.Getenv(delayProxyEnv); spec != "" {
		runDelayProxy(spec) // this process is a gray drill's delay proxy
	}
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(parallel))
	}
	code := m.Run()
	if binsVal.kvnode != "" {
		os.RemoveAll(filepath.Dir(binsVal.kvnode))
	}
	os.Exit(code)
}
