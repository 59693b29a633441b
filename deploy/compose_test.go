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
	"testing"
	"time"

	"google.golang.org/grpc"
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
}

// fault writes at a constant 50/s with ack=2 through n1 while docker inject's n3 and, 5s
// later, heal's it: no write may fail (two replicas stay; grayOK: failures are reported),
// and every acknowledged key reads back with a quorum once n3 is healthy again.
func fault(t *testing.T, c *composeCluster, name string, inject, heal []string, grayOK bool) {
	tlsCfg, err := certs.Client(c.certs, certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(c.grpcAddr(1), grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := kvpb.NewKVClient(conn)

	type outcome struct {
		acked  []string
		failed []error
		lat    []time.Duration
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan outcome)
	go func() {
		var o outcome
		defer func() { done <- o }()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			key := fmt.Sprintf("fault-%05d", i)
			start := time.Now()
			rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := kv.Put(rctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte(key), Ack: 2, From: 3})
			cancel()
			o.lat = append(o.lat, time.Since(start))
			if err != nil {
				o.failed = append(o.failed, fmt.Errorf("%s: %w", key, err))
				continue
			}
			o.acked = append(o.acked, key)
		}
	}()
	phase := func(d time.Duration) {
		select {
		case <-time.After(d): // load runs for d
		case <-t.Context().Done():
		}
	}
	docker := func(args ...string) {
		if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
			stop()
			<-done
			t.Fatalf("docker %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	n3 := c.container(t, 3)
	phase(2 * time.Second)
	docker(append(inject, n3)...)
	phase(5 * time.Second)
	docker(append(heal, n3)...)
	eventually.Succeeds(t, 60*time.Second, func() error {
		out, err := exec.Command("docker", "inspect", "-f", "{{.State.Health.Status}}", n3).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != "healthy" {
			return fmt.Errorf("n3 after restart: got health %q (%v), want healthy", got, err)
		}
		return nil
	})
	phase(2 * time.Second)
	stop()
	o := <-done

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
	p99 := o.lat[len(o.lat)*99/100]
	t.Logf("%s n3: %d writes acknowledged, %d failed, %d lost; p99 %v, max %v", name, len(o.acked), len(o.failed), lost, p99, o.lat[len(o.lat)-1])
	for _, err := range o.failed {
		if grayOK {
			t.Logf("write through n1 failed during a gray failure: %v", err)
			continue
		}
		t.Errorf("write through n1 failed with n1 and n2 up: %v", err)
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
