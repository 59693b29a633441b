package node

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"ringkv/node/certs"
)

// `kvnode health` answers 0 for a ready node, over HTTPS with --certs-dir, and 1 when the
// probe cannot talk to the admin port (plaintext against HTTPS, nothing listening).
func TestHealthProbe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if _, err := certs.CreateCA(dir, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.CreateNode(dir, []string{"node.example"}, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ID, cfg.InMemory, cfg.Replicas, cfg.VNodes, cfg.CertsDir = "n1", true, 1, 8, dir
	cfg.GRPCAddr, cfg.HTTPAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	n, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	// Without --peers the node awaits admission: /readyz answers 503, /healthz 200.
	admin := n.Addrs().Admin
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"alive over HTTPS", []string{"--admin", admin, "--certs-dir", dir, "--path", "/healthz"}, 0},
		{"awaiting admission", []string{"--admin", admin, "--certs-dir", dir}, 1},
		{"plaintext against HTTPS", []string{"--admin", admin, "--path", "/healthz"}, 1},
		{"certs dir without ca.crt: plaintext", []string{"--admin", admin, "--certs-dir", t.TempDir(), "--path", "/healthz"}, 1},
		{"bad flag", []string{"--nope"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := probe(context.Background(), tc.args, &out, &errOut); got != tc.want {
				t.Errorf("got exit %d (%q %q), want %d", got, out.String(), errOut.String(), tc.want)
			}
			if tc.want != 0 && strings.Count(errOut.String(), "\n") != 1 {
				t.Errorf("stderr %q: want one line", errOut.String())
			}
		})
	}
}
