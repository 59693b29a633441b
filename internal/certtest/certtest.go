// Package certtest makes the certificates of a test cluster: one home for the CA, node and
// client files that TLS tests of kvnode and kvctl start from.
package certtest

import (
	"path/filepath"
	"testing"

	"ringkv/node/certs"
)

// Dir creates, in a fresh temporary directory, a CA, a node certificate for 127.0.0.1 and a
// client certificate for the user "root", and returns the directory (kvnode and kvctl
// --certs-dir).
func Dir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	if _, err := certs.CreateCA(dir, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.CreateNode(dir, []string{"127.0.0.1"}, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.CreateClient(dir, "root", certs.Options{}); err != nil {
		t.Fatal(err)
	}
	return dir
}
