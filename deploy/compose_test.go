// Package deploy holds the container image, the compose cluster and the Kubernetes manifests
// of ringkv; its test brings the compose cluster up and down.
package deploy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ringkv/ctl"
	"ringkv/ctl/cli"
	"ringkv/internal/eventually"
	"ringkv/loadgen"
	"ringkv/node/certs"
)

// TestCompose: deploy/up.sh brings a TLS cluster of three containers up on free loopback
// ports; kvctl with the client certificate sees 3 nodes UP and writes a key that the HTTPS
// API of another node serves; kvctl without certificates is refused; deploy/down.sh removes
// containers, network and volumes. Skipped without a Docker engine or with -short.
//
// Then the fault drills, one at a time, each under kvctl bench at 100 req/s with ack=2
// writes and quorum reads (--ack 2 --from 3) over TLS: n3 killed and restarted (the bench on
// n1's HTTPS API), n3 cut off the network, n3 paused, and a rolling restart of all three.
// Each checks that no request failed through a coordinator that stayed connected (the
// pause's failures are reported), logs p99 over the run and the worst second's p99 during
// the fault, checks that every replica holds every acknowledged write within a minute of the
// heal, by a local scan of each node and a dry-run repair, without client reads (converge),
// and then reads every acknowledged write back at a quorum (kvctl bench check).
func TestCompose(t *testing.T) {
	t.Parallel()
	c := startCompose(t, nil)
	ports, certsDir := c.ports, c.certs
	grpc1 := fmt.Sprintf("127.0.0.1:%d", ports["RINGKV_N1_GRPC"])
	code, stdout, stderr := kvctl(t, "--addr", grpc1, "--certs-dir", certsDir, "status")
	if code != 0 || strings.Count(stdout, "\tUP\t") != 3 {
		t.Fatalf("kvctl status with certs: got exit %d\n%s%s\nwant 3 nodes UP", code, stdout, stderr)
	}
	if code, _, stderr := kvctl(t, "--addr", grpc1, "--certs-dir", certsDir, "put", "k1", "v1", "--ack", "3"); code != 0 {
		t.Fatalf("kvctl put --ack 3: got exit %d %s", code, stderr)
	}
	code, _, stderr = kvctl(t, "--addr", grpc1, "status", "--timeout", "3s")
	if code != cli.ExitFailure || !strings.Contains(stderr, "--certs-dir") {
		t.Errorf("kvctl status without certs: got exit %d %q, want 1 and a hint to pass --certs-dir", code, stderr)
	}

	pool, err := certs.CAPool(certsDir)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/v0/entity?id=k1", ports["RINGKV_N3_HTTP"]))
	if err != nil {
		t.Fatalf("GET over HTTPS from n3: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "v1" {
		t.Errorf("GET k1 from n3: got %d %q, want 200 \"v1\"", resp.StatusCode, body)
	}

	// One fault at a time on n3, under kvctl bench through n1; each heals before the next.
	network := c.project + "_ringkv"
	fill(t, c)
	for _, f := range []struct {
		name         string
		inject, heal []string
		// gray: a paused node holds its connections open and may cost a few requests,
		// which are reported, not failed.
		gray bool
		// https: the bench loads n1's HTTPS API instead of its gRPC API.
		https bool
		// during, when set, checks the cluster while the fault lasts.
		during func(t *testing.T)
	}{
		{name: "kill and restart", inject: []string{"kill"}, heal: []string{"start"}, https: true},
		{name: "partition", inject: []string{"network", "disconnect", network}, heal: []string{"network", "connect", "--alias", "n3", network},
			// Fault limits: the cut-off node's /readyz says it has no quorum and names the
			// peers it cannot reach, with no client request; n1 stays ready.
			during: func(t *testing.T) {
				eventually.Succeeds(t, 20*time.Second, func() error {
					out, err := c.health(t, 3)
					if err == nil || !strings.Contains(out, "no quorum") || !strings.Contains(out, "n1") || !strings.Contains(out, "n2") {
						return fmt.Errorf("n3's /readyz while cut off: got %v %q, want 503 no quorum naming n1 and n2", err, out)
					}
					return nil
				})
				if out, err := c.health(t, 1); err != nil {
					t.Errorf("n1's /readyz while n3 is cut off: got %v %s, want ready", err, out)
				}
			}},
		{name: "pause", inject: []string{"pause"}, heal: []string{"unpause"}, gray: true},
	} {
		t.Run(f.name+" n3 under bench", func(t *testing.T) {
			b := c.startBench(t, f.name, 1, f.https)
			n3 := c.container(t, 3)
			phase(t, 2*time.Second)
			b.mark("inject")
			b.docker(t, append(f.inject, n3)...)
			phase(t, 5*time.Second)
			if f.during != nil {
				f.during(t)
			}
			b.docker(t, append(f.heal, n3)...)
			c.waitReady(t, 3)
			b.mark("healed")
			phase(t, 2*time.Second)
			b.finish(t, c, f.gray)
		})
	}
	// Rolling restart of all three (docker restart: SIGTERM, drain, start), each once the one
	// before is ready again: n3 and n2 under a bench through n1, then n1 under a bench
	// through n2, so that every bench's coordinator stays up.
	t.Run("rolling restart under bench", func(t *testing.T) {
		for _, step := range []struct {
			coord    int
			restarts []int
		}{{1, []int{3, 2}}, {2, []int{1}}} {
			b := c.startBench(t, fmt.Sprintf("rolling via n%d", step.coord), step.coord, false)
			phase(t, time.Second)
			b.mark("inject")
			for _, i := range step.restarts {
				b.docker(t, "restart", "--time", "30", c.container(t, i))
				c.waitReady(t, i)
				c.waitSeenUp(t, step.coord, i)
			}
			b.mark("healed")
			phase(t, 2*time.Second)
			b.finish(t, c, false)
		}
	})
}

// Bench load of the fault drills: kvctl bench at a constant rate, half quorum reads (ack=2
// of 3) of the keys fill wrote, half ack=2 writes that overwrite them, every acknowledged
// write recorded and read back at a quorum by kvctl bench check.
const (
	benchRate   = "100"
	benchPrefix = "fault:"
	benchKeys   = 4000 // more than the longest drill's requests: each key is written once per drill
)

// fill writes every bench key once, so the drills' reads find data. kvctl bench fill writes
// again the keys whose write failed (504s: a second in which the containers, beside the gray
// drills on a 2-core CI machine, answered no write in time), and fails only if some are still
// not written: the drills need every one of them.
func fill(t *testing.T, c *composeCluster) {
	t.Helper()
	code, out, errOut := kvctl(t, "--addr", c.grpcAddr(1), "--certs-dir", c.certs, "bench", "fill",
		"--keys", strconv.Itoa(benchKeys), "--key-prefix", benchPrefix, "--ack", "2", "--from", "3", "-c", "16")
	if code != 0 {
		t.Fatalf("kvctl bench fill: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(errOut, "writing again") {
		t.Logf("kvctl bench fill wrote some keys again: %s", lastLine(out))
	}
}

// bench is a kvctl bench run in the background, ended by finish.
type bench struct {
	name   string
	coord  int
	record string
	t0     time.Time
	marks  map[string]time.Duration
	stop   func()
	done   chan benchOut
	// watch samples the nodes' hints and repair sessions from the bench's start.
	watch *watcher
}

type benchOut struct {
	code           int
	stdout, stderr string
}

var benchSeed atomic.Int64

// startBench runs kvctl bench through node coord's published gRPC port (https: its HTTPS
// API) until finish, recording acknowledged writes.
func (c *composeCluster) startBench(t *testing.T, name string, coord int, https bool) *bench {
	t.Helper()
	b := &bench{name: name, coord: coord, record: filepath.Join(t.TempDir(), "acked.jsonl"), marks: map[string]time.Duration{}, done: make(chan benchOut, 1)}
	args := []string{"--addr", c.grpcAddr(coord), "--certs-dir", c.certs, "bench",
		"--rate", benchRate, "-c", "32", "--warmup", "0s", "--duration", "10m", "--timeout", "3s", "--max-lag", "1m",
		"--workload", "mixed:get=50,put=50", "--key-dist", "sequential", "--keys", strconv.Itoa(benchKeys), "--key-prefix", benchPrefix,
		// A new seed per drill: values differ from every earlier drill's, so an overwrite
		// that is lost cannot read back as an equal older value.
		"--seed", strconv.FormatInt(benchSeed.Add(1), 10),
		"--ack", "2", "--from", "3", "--record", b.record, "--max-errors", "100", "--json"}
	if https {
		args = append(args, "--target", "http", "--http", fmt.Sprintf("127.0.0.1:%d", c.ports[fmt.Sprintf("RINGKV_N%d_HTTP", coord)]))
	}
	b.watch = c.watch(t)
	ctx, stop := context.WithCancel(context.Background())
	b.stop = stop
	b.t0 = time.Now()
	go func() {
		code, out, errOut := kvctlCtx(ctx, args...)
		b.done <- benchOut{code, out, errOut}
	}()
	t.Cleanup(func() {
		stop()
		<-b.done
		b.done <- benchOut{}
	})
	return b
}

// mark notes the time of a drill's event, relative to the bench's start.
func (b *bench) mark(name string) { b.marks[name] = time.Since(b.t0) }

// docker runs one docker command; on failure it fails the test (the bench stops at cleanup).
func (b *bench) docker(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// finish stops the bench, reports its figures (rate, quorum request errors, p99 of the
// whole run and worst per-second p99 between inject and healed), fails the test on any
// failed request unless gray, and checks with kvctl bench check that every acknowledged
// write reads back at a quorum.
func (b *bench) finish(t *testing.T, c *composeCluster, gray bool) {
	t.Helper()
	b.stop()
	out := <-b.done
	b.done <- out
	var rep loadgen.Report
	if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
		t.Fatalf("%s: kvctl bench exit %d, its --json: %v\n%s%s", b.name, out.code, err, out.stdout, out.stderr)
	}
	var errs int64
	for _, n := range rep.Errors {
		errs += n
	}
	p99 := 0.0
	for _, p := range rep.Latency.Percentiles {
		if p.P == 99 {
			p99 = p.Ms
		}
	}
	worst := worstSecondP99(out.stderr, b.marks["inject"], b.marks["healed"])
	t.Logf("%s (bench via n%d, %s): %d requests at %.1f/s, %d failed %v; p99 %.1f ms, worst second's p99 during the fault %.1f ms (fault from %.1fs to %.1fs)",
		b.name, b.coord, rep.Target, rep.Requests, rep.RateAchieved, errs, rep.Errors, p99, worst,
		b.marks["inject"].Seconds(), b.marks["healed"].Seconds())
	if rep.Requests == 0 {
		t.Errorf("%s: the bench sent nothing:\n%s", b.name, out.stderr)
	}
	if errs > 0 && !gray {
		t.Errorf("%s: %d quorum requests failed through n%d, which stayed connected: %v", b.name, errs, b.coord, rep.Errors)
	}
	// Before kvctl bench check: its quorum reads would repair what they read.
	b.converge(t, c)
	code, stdout, stderr := kvctl(t, "--addr", c.grpcAddr(b.coord), "--certs-dir", c.certs, "bench", "check", b.record, "--ack", "2", "--from", "3")
	t.Logf("%s: %s", b.name, strings.TrimSpace(stdout))
	if code != 0 || !strings.Contains(stdout, " 0 lost, 0 unreadable") {
		t.Errorf("%s: kvctl bench check: exit %d\n%s%s\nwant 0 lost", b.name, code, stdout, stderr)
	}
}

// worstSecondP99 is the highest p99 of the bench's live lines ("[  5.0s] ... p99 12.34ms
// ...") whose second ends between from and to (plus one second), in ms.
func worstSecondP99(live string, from, to time.Duration) float64 {
	worst := 0.0
	for _, line := range strings.Split(live, "\n") {
		var end, rate, p50, p99 float64
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "[%fs] %f req/s  p50 %fms  p99 %fms", &end, &rate, &p50, &p99); err != nil {
			continue
		}
		if e := time.Duration(end * float64(time.Second)); e > from && e <= to+time.Second {
			worst = max(worst, p99)
		}
	}
	return worst
}

// phase lets the load run for d (not a wait for a state: the load is the point).
func phase(t *testing.T, d time.Duration) {
	select {
	case <-time.After(d):
	case <-t.Context().Done():
	}
}

// composeCluster is a running deploy/up.sh cluster of this test process.
type composeCluster struct {
	project string
	certs   string
	env     []string
	ports   map[string]int // RINGKV_N<i>_HTTP|GRPC -> host port
}

// TestMain runs the package's cases with kvctl's environment cleared: the in-process kvctl
// reads KVCTL_CERTS_DIR, and the cases, side by side (t.Parallel), cannot t.Setenv.
func TestMain(m *testing.M) {
	os.Unsetenv("KVCTL_CERTS_DIR")
	os.Exit(m.Run())
}

// composeSeq numbers this process's compose clusters, so that each has a project and an
// image of its own.
var (
	composeSeq atomic.Int64
	upMu       sync.Mutex
)

// startCompose runs deploy/up.sh (with upArgs, and env added to the environment) on free
// loopback ports with its own project name and certificates, and deploy/down.sh at cleanup
// (checking nothing is left). It skips the test without a Docker engine or compose, or with
// -short.
func startCompose(t *testing.T, env []string, upArgs ...string) *composeCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no containers")
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("no Docker engine: %v", err)
	}
	if err := exec.Command("docker-compose", "version").Run(); err != nil {
		if err := exec.Command("docker", "compose", "version").Run(); err != nil {
			t.Skip("neither docker-compose nor docker compose")
		}
	}
	// Names of their own (project, image), so that no other cluster or build collides.
	c := &composeCluster{project: fmt.Sprintf("ringkvtest%dc%d", os.Getpid(), composeSeq.Add(1)), certs: t.TempDir(), ports: map[string]int{}}
	image := "ringkv:" + c.project
	c.env = append(append(os.Environ(), env...), "RINGKV_PROJECT="+c.project, "RINGKV_CERTS="+c.certs, "RINGKV_UP_TIMEOUT=60", "RINGKV_IMAGE="+image,
		"RINGKV_REPAIR_INTERVAL="+composeRepairInterval)
	for i := 1; i <= 3; i++ {
		for _, kind := range []string{"HTTP", "GRPC"} {
			name := fmt.Sprintf("RINGKV_N%d_%s", i, kind)
			c.ports[name] = freePort(t)
			c.env = append(c.env, name+"="+strconv.Itoa(c.ports[name]))
		}
	}
	t.Cleanup(func() {
		if out, err := c.script("down.sh").CombinedOutput(); err != nil {
			t.Errorf("down.sh: %v\n%s", err, out)
		}
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+c.project).Output()
		vols, _ := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=com.docker.compose.project="+c.project).Output()
		if left := strings.TrimSpace(string(out) + string(vols)); left != "" {
			t.Errorf("after down.sh: containers or volumes left: %s", left)
		}
		if out, err := exec.Command("docker", "rmi", image).CombinedOutput(); err != nil {
			t.Logf("docker rmi %s: %v %s", image, err, out)
		}
	})
	// One up.sh at a time: each builds its image from the tree, and the second build, once
	// the first is done, is a build cache hit rather than the same compile beside it.
	upMu.Lock()
	out, err := c.script("up.sh", upArgs...).CombinedOutput()
	upMu.Unlock()
	if err != nil {
		t.Fatalf("up.sh: %v\n%s", err, out)
	}
	return c
}

func (c *composeCluster) script(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("./"+name, args...)
	cmd.Env = c.env
	return cmd
}

// grpcAddr is node i's published gRPC address.
func (c *composeCluster) grpcAddr(i int) string {
	return fmt.Sprintf("127.0.0.1:%d", c.ports[fmt.Sprintf("RINGKV_N%d_GRPC", i)])
}

// container is the id of node i's container.
func (c *composeCluster) container(t *testing.T, i int) string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+c.project,
		"--filter", fmt.Sprintf("label=com.docker.compose.service=n%d", i)).Output()
	id := strings.TrimSpace(string(out))
	if err != nil || id == "" || strings.Contains(id, "\n") {
		t.Fatalf("container of n%d: got %q (%v), want one id", i, id, err)
	}
	return id
}

// waitReady waits until node i answers /readyz (kvnode health inside its container).
func (c *composeCluster) waitReady(t *testing.T, i int) {
	t.Helper()
	eventually.Succeeds(t, 60*time.Second, func() error {
		if out, err := c.health(t, i); err != nil {
			return fmt.Errorf("n%d not ready: %v %s", i, err, out)
		}
		return nil
	})
}

// waitSeenUp waits until node from reports node i UP in kvctl status: the restarted node is
// not only ready by its own /readyz but reachable from the coordinator, which is what an
// operator checks (as with nodetool status) before restarting the next node.
func (c *composeCluster) waitSeenUp(t *testing.T, from, i int) {
	t.Helper()
	id := fmt.Sprintf("n%d", i)
	eventually.Succeeds(t, 60*time.Second, func() error {
		code, out, errOut := kvctl(t, "--addr", c.grpcAddr(from), "--certs-dir", c.certs, "status", "-o", "json")
		if code != 0 {
			return fmt.Errorf("kvctl status via n%d: exit %d: %s", from, code, errOut)
		}
		var st struct {
			Nodes []struct{ ID, State string }
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return fmt.Errorf("kvctl status via n%d: %v", from, err)
		}
		for _, n := range st.Nodes {
			if n.ID == id {
				if n.State != "NODE_STATE_UP" {
					return fmt.Errorf("n%d sees %s %s", from, id, n.State)
				}
				return nil
			}
		}
		return fmt.Errorf("n%d's status lists no %s", from, id)
	})
}

// health runs kvnode health (/readyz) inside node i's container: it needs no network
// between the test and the node.
func (c *composeCluster) health(t *testing.T, i int) (string, error) {
	t.Helper()
	out, err := exec.Command("docker", "exec", c.container(t, i), "/kvnode", "health", "--certs-dir", "/certs").CombinedOutput()
	return string(out), err
}

func kvctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return kvctlCtx(ctx, args...)
}

// kvctlCtx runs kvctl in this process until it ends or ctx does; safe from any goroutine.
func kvctlCtx(ctx context.Context, args ...string) (int, string, string) {
	ios, _, out, errOut := cli.Test()
	f := cli.NewFactory(ios)
	defer f.Close()
	root := ctl.NewRootCmd(f)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		errOut.WriteString(err.Error())
	}
	return cli.ExitCode(err), out.String(), errOut.String()
}

// freePort is a free loopback port below the kernel's ephemeral range (32768 up), where
// the machine's own outgoing connections could take it between this check and the
// container's bind, and outside test/'s 20000-31999; never the same twice in a process.
func freePort(t *testing.T) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := 12000 + rand.IntN(6000)
		if usedPorts[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		usedPorts[port] = true
		return port
	}
	t.Fatalf("no free port in 12000-17999")
	return 0
}

var (
	portsMu   sync.Mutex
	usedPorts = map[int]bool{}
)
