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
	"strconv"
	"strings"
	"testing"
	"time"

	"ringkv/ctl"
	"ringkv/ctl/cli"
	"ringkv/node/certs"
)

// TestCompose: deploy/up.sh brings a TLS cluster of three containers up on free loopback
// ports; kvctl with the client certificate sees 3 nodes UP and writes a key that the HTTPS
// API of another node serves; kvctl without certificates is refused; deploy/down.sh removes
// containers, network and volumes. Skipped without a Docker engine or with -short.
func TestCompose(t *testing.T) {
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
	project := fmt.Sprintf("ringkvtest%d", os.Getpid())
	certsDir := t.TempDir()
	env := append(os.Environ(), "RINGKV_PROJECT="+project, "RINGKV_CERTS="+certsDir, "RINGKV_UP_TIMEOUT=60")
	ports := map[string]int{}
	for i := 1; i <= 3; i++ {
		for _, kind := range []string{"HTTP", "GRPC"} {
			name := fmt.Sprintf("RINGKV_N%d_%s", i, kind)
			ports[name] = freePort(t)
			env = append(env, name+"="+strconv.Itoa(ports[name]))
		}
	}
	script := func(name string) *exec.Cmd {
		cmd := exec.Command("./" + name)
		cmd.Env = env
		return cmd
	}
	t.Cleanup(func() {
		if out, err := script("down.sh").CombinedOutput(); err != nil {
			t.Errorf("down.sh: %v\n%s", err, out)
		}
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+project).Output()
		vols, _ := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=com.docker.compose.project="+project).Output()
		if left := strings.TrimSpace(string(out) + string(vols)); left != "" {
			t.Errorf("after down.sh: containers or volumes left: %s", left)
		}
	})
	out, err := script("up.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("up.sh: %v\n%s", err, out)
	}

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
