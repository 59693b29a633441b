// Package deploy holds the container image, the compose cluster and the Kubernetes manifests
// of ringkv; its test brings the compose cluster up and down.
package deploy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"

	"ringkv/ctl"
	"ringkv/ctl/cli"
	"ringkv/internal/eventually"
	"ringkv/node/certs"
	"ringkv/proto/kvpb"
)

// TestCompose: deploy/up.sh brings a TLS cluster of three containers up on free loopback
// ports; kvctl with the client certificate sees 3 nodes UP and writes a key that the HTTPS
// API of another node serves; kvctl without certificates is refused; deploy/down.sh removes
// containers, network and volumes. Skipped without a Docker engine or with -short.
func TestCompose(t *testing.T) {
	c := startCompose(t)
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

	// One fault at a time on n3, under load through n1; each heals before the next.
	network := c.project + "_ringkv"
	for _, f := range []struct {
		name         string
		inject, heal []string
		// grayOK: the fault may cost a few writes (a paused node holds its connections
		// open), which are reported, not failed.
		grayOK bool
	}{
		{name: "kill and restart", inject: []string{"kill"}, heal: []string{"start"}},
		{name: "partition", inject: []string{"network", "disconnect", network}, heal: []string{"network", "connect", "--alias", "n3", network}},
		{name: "pause", inject: []string{"pause"}, heal: []string{"unpause"}, grayOK: true},
	} {
		t.Run(f.name+" n3 under load", func(t *testing.T) { fault(t, c, f.name, f.inject, f.heal, f.grayOK) })
	}
	t.Run("rolling restart under load", func(t *testing.T) { rolling(t, c) })
}

// fault writes at a constant 50/s with ack=2 through n1 while docker inject's n3 and, 5s
// later, heal's it: no write may fail (two replicas stay; grayOK: failures are reported),
// and every acknowledged key reads back with a quorum once n3 is ready again.
func fault(t *testing.T, c *composeCluster, name string, inject, heal []string, grayOK bool) {
	n1 := c.kv(t, 1)
	l := startLoad([]kvpb.KVClient{n1}, func(int) bool { return grayOK })
	n3 := c.container(t, 3)
	phase(t, 2*time.Second)
	l.docker(t, append(inject, n3)...)
	phase(t, 5*time.Second)
	l.docker(t, append(heal, n3)...)
	c.waitReady(t, 3)
	phase(t, 2*time.Second)
	l.finish(t, name+" n3", n1)
}

// rolling restarts n3, n2, then n1 (docker restart: SIGTERM, drain, start), each once the
// one before is ready again, while writes go round-robin through all three coordinators:
// writes through the node restarting may fail (reported), no other may, and every
// acknowledged key reads back with a quorum.
func rolling(t *testing.T, c *composeCluster) {
	coords := []kvpb.KVClient{c.kv(t, 1), c.kv(t, 2), c.kv(t, 3)}
	var down atomic.Int32 // the node restarting (1-based), 0 = none
	l := startLoad(coords, func(i int) bool { return int(down.Load()) == i+1 })
	phase(t, time.Second)
	for _, i := range []int{3, 2, 1} {
		down.Store(int32(i))
		l.docker(t, "restart", "--time", "30", c.container(t, i))
		c.waitReady(t, i)
		// Its coordinator's client reconnects on its own schedule: writes through it stay
		// excused until one passes.
		eventually.Succeeds(t, 30*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := coords[i-1].Put(ctx, &kvpb.PutRequest{Key: []byte("rolling-probe"), Value: []byte("x"), Ack: 2, From: 3})
			return err
		})
		down.Store(0)
		phase(t, time.Second)
	}
	l.finish(t, "rolling restart", coords[0])
}

// phase lets the load run for d (not a wait for a state: the load is the point).
func phase(t *testing.T, d time.Duration) {
	select {
	case <-time.After(d):
	case <-t.Context().Done():
	}
}

// load is a writer putting fault-NNNNN keys at a constant 50/s with ack=2, round-robin
// through its coordinators; a failure through coordinator i counts as excused when
// excused(i) says so at the time it returns.
type load struct {
	stop func()
	done chan outcome
}

type outcome struct {
	acked           []string
	failed, excused []error
	lat             []time.Duration
}

func startLoad(coords []kvpb.KVClient, excused func(i int) bool) *load {
	ctx, stop := context.WithCancel(context.Background())
	l := &load{stop: stop, done: make(chan outcome)}
	go func() {
		var o outcome
		defer func() { l.done <- o }()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			i := n % len(coords)
			key := fmt.Sprintf("fault-%05d", n)
			start := time.Now()
			rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := coords[i].Put(rctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte(key), Ack: 2, From: 3})
			cancel()
			o.lat = append(o.lat, time.Since(start))
			switch {
			case err == nil:
				o.acked = append(o.acked, key)
			case excused(i):
				o.excused = append(o.excused, fmt.Errorf("%s through n%d: %w", key, i+1, err))
			default:
				o.failed = append(o.failed, fmt.Errorf("%s through n%d: %w", key, i+1, err))
			}
		}
	}()
	return l
}

// docker runs one docker command; on failure it stops the load and fails the test.
func (l *load) docker(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		l.stop()
		<-l.done
		t.Fatalf("docker %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// finish stops the load, reads every acknowledged key back through kv with ack=2 and
// reports the figures; failed writes fail the test, excused ones are logged.
func (l *load) finish(t *testing.T, name string, kv kvpb.KVClient) {
	t.Helper()
	l.stop()
	o := <-l.done
	lost := 0
	for _, key := range o.acked {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := kv.Get(rctx, &kvpb.GetRequest{Key: []byte(key), Ack: 2, From: 3})
		cancel()
		if err != nil || string(resp.GetValue()) != key {
			lost++
			t.Errorf("acknowledged %s: got %q %v, want it back", key, resp.GetValue(), err)
		}
	}
	slices.Sort(o.lat)
	t.Logf("%s: %d writes acknowledged, %d failed, %d excused, %d lost; p99 %v, max %v",
		name, len(o.acked), len(o.failed), len(o.excused), lost, o.lat[len(o.lat)*99/100], o.lat[len(o.lat)-1])
	for _, err := range o.excused {
		t.Logf("excused: %v", err)
	}
	for _, err := range o.failed {
		t.Errorf("write failed through a coordinator that stayed up: %v", err)
	}
}

// composeCluster is a running deploy/up.sh cluster of this test process.
type composeCluster struct {
	project string
	certs   string
	env     []string
	ports   map[string]int // RINGKV_N<i>_HTTP|GRPC -> host port
}

// startCompose runs deploy/up.sh on free loopback ports with its own project name and
// certificates, and deploy/down.sh at cleanup (checking nothing is left). It skips the test
// without a Docker engine or compose, or with -short.
func startCompose(t *testing.T) *composeCluster {
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
	t.Setenv("KVCTL_CERTS_DIR", "")
	c := &composeCluster{project: fmt.Sprintf("ringkvtest%d", os.Getpid()), certs: t.TempDir(), ports: map[string]int{}}
	c.env = append(os.Environ(), "RINGKV_PROJECT="+c.project, "RINGKV_CERTS="+c.certs, "RINGKV_UP_TIMEOUT=60")
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
	})
	if out, err := c.script("up.sh").CombinedOutput(); err != nil {
		t.Fatalf("up.sh: %v\n%s", err, out)
	}
	return c
}

func (c *composeCluster) script(name string) *exec.Cmd {
	cmd := exec.Command("./" + name)
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

// kv is a KV client of node i's published gRPC port, with the client certificate.
func (c *composeCluster) kv(t *testing.T, i int) kvpb.KVClient {
	t.Helper()
	tlsCfg, err := certs.Client(c.certs, certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(c.grpcAddr(i), grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)),
		// Reconnect to a restarted node within a second, not gRPC's default of up to 2m.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, MaxDelay: time.Second}, MinConnectTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return kvpb.NewKVClient(conn)
}

// waitReady waits until node i answers /readyz (kvnode health inside its container).
func (c *composeCluster) waitReady(t *testing.T, i int) {
	t.Helper()
	id := c.container(t, i)
	eventually.Succeeds(t, 60*time.Second, func() error {
		out, err := exec.Command("docker", "exec", id, "/kvnode", "health", "--certs-dir", "/certs").CombinedOutput()
		if err != nil {
			return fmt.Errorf("n%d not ready: %v %s", i, err, out)
		}
		return nil
	})
}

func kvctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ios, _, out, errOut := cli.Test()
	f := cli.NewFactory(ios)
	defer f.Close()
	root := ctl.NewRootCmd(f)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if err != nil {
		errOut.WriteString(err.Error())
	}
	return cli.ExitCode(err), out.String(), errOut.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
