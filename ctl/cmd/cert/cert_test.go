package cert_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ringkv/ctl"
	"ringkv/ctl/cli"
	"ringkv/node"
	"ringkv/node/certs"
)

// kvctl runs kvctl's command tree with args and returns its exit code, stdout and stderr.
func kvctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ios, _, out, errOut := cli.Test()
	f := cli.NewFactory(ios)
	defer f.Close()
	root := ctl.NewRootCmd(f)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		errOut.WriteString(err.Error())
	}
	return cli.ExitCode(err), out.String(), errOut.String()
}

// makeCerts creates a CA, a node certificate for 127.0.0.1 and a client certificate with
// kvctl cert, as an operator would.
func makeCerts(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	for _, args := range [][]string{
		{"cert", "create-ca", "--certs-dir", dir},
		{"cert", "create-node", "127.0.0.1", "localhost", "--certs-dir", dir},
		{"cert", "create-client", "--certs-dir", dir},
	} {
		if code, _, errOut := kvctl(t, args...); code != cli.ExitOK {
			t.Fatalf("kvctl %s: got exit %d (%s), want 0", strings.Join(args, " "), code, errOut)
		}
	}
	return dir
}

func TestCreate(t *testing.T) {
	dir := makeCerts(t)
	for _, f := range []string{certs.CACert, certs.CAKey, certs.NodeCert, certs.NodeKey, certs.ClientCert, certs.ClientKey} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	key, _ := os.ReadFile(filepath.Join(dir, certs.NodeKey))
	tests := []struct {
		name    string
		args    []string
		code    int
		errText string
	}{
		{"ca again", []string{"cert", "create-ca", "--certs-dir", dir}, cli.ExitFailure, "ca.crt: already exists (use --overwrite to replace it)"},
		{"node again", []string{"cert", "create-node", "n1", "--certs-dir", dir}, cli.ExitFailure, "node.crt: already exists"},
		{"node without hosts", []string{"cert", "create-node", "--certs-dir", dir}, cli.ExitUsage, "takes HOST [HOST...]: got 0 arguments"},
		{"no certs dir", []string{"cert", "create-ca"}, cli.ExitUsage, "--certs-dir is required"},
		{"node without a CA", []string{"cert", "create-node", "n1", "--certs-dir", t.TempDir()}, cli.ExitFailure, "run kvctl cert create-ca first"},
		{"client overwrite", []string{"cert", "create-client", "--overwrite", "--certs-dir", dir}, cli.ExitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KVCTL_CERTS_DIR", "")
			code, _, errOut := kvctl(t, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.errText) {
				t.Errorf("got exit %d %q, want %d %q", code, errOut, tt.code, tt.errText)
			}
		})
	}
	if after, _ := os.ReadFile(filepath.Join(dir, certs.NodeKey)); string(after) != string(key) {
		t.Error("node.key changed after a refused create-node")
	}
}

// A node with --certs-dir answers kvctl with the client certificate (flag or env) and
// refuses kvctl without it.
func TestTLSNode(t *testing.T) {
	dir := makeCerts(t)
	base := node.DefaultConfig()
	base.Replicas, base.VNodes, base.CertsDir = 1, 8, dir
	c, err := node.StartLocalCluster(context.Background(), 1, base, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	addr := c.Node(0).Addrs().GRPC

	code, out, errOut := kvctl(t, "--addr", addr, "--certs-dir", dir, "status")
	if code != cli.ExitOK || !strings.Contains(out, "UP") {
		t.Errorf("status with --certs-dir: got exit %d %q %q, want 0 and a node UP", code, out, errOut)
	}
	t.Setenv("KVCTL_CERTS_DIR", dir)
	if code, _, errOut := kvctl(t, "--addr", addr, "put", "k", "v"); code != cli.ExitOK {
		t.Errorf("put with KVCTL_CERTS_DIR: got exit %d %q, want 0", code, errOut)
	}
	t.Setenv("KVCTL_CERTS_DIR", "")
	code, _, errOut = kvctl(t, "--addr", addr, "get", "k", "--timeout", "2s")
	if code != cli.ExitFailure {
		t.Errorf("get without certs: got exit %d %q, want 1", code, errOut)
	}
	if !strings.Contains(errOut, "pass --certs-dir") {
		t.Errorf("get without certs: got %q, want a hint to pass --certs-dir", errOut)
	}
}
