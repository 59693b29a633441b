package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func mustDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	if _, err := CreateCA(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateNode(dir, []string{"127.0.0.1"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateClient(dir, "root", Options{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func parse(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(b, mustRead(t, path[:len(path)-len(".crt")]+".key"))
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRoles: a node certificate is a node's; a client certificate is not, even one whose
// common name is "node" (made by hand with the CA's key: CreateClient refuses the name).
func TestRoles(t *testing.T) {
	dir := mustDir(t)
	if _, err := createSigned(dir, "forged.crt", "forged.key", NodeCommonName, nil, Options{}, x509.ExtKeyUsageClientAuth); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		node bool
	}{
		{NodeCert, true},
		{ClientCert, false},
		{"forged.crt", false},
	} {
		if got := IsNode(parse(t, filepath.Join(dir, tc.file))); got != tc.node {
			t.Errorf("IsNode(%s) = %t, want %t", tc.file, got, tc.node)
		}
	}
	if IsNode(nil) {
		t.Error("IsNode(nil) = true, want false")
	}
	if _, err := CreateClient(t.TempDir(), NodeCommonName, Options{}); !errors.Is(err, ErrReservedUser) {
		t.Errorf("CreateClient --user node: got %v, want %v", err, ErrReservedUser)
	}
}

// TestRotation: a server and a client built on one Pair present the certificate the files
// hold at each handshake: after node.crt/node.key are replaced, the next handshake shows
// the new serial with no restart; a half-written replacement (garbage) is reported and the
// last good certificate stays in use; once whole again it is loaded.
func TestRotation(t *testing.T) {
	dir := mustDir(t)
	pair, err := NewPair(dir, NodeCert, NodeKey)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var errs, loads int
	pair.OnError = func(error) { mu.Lock(); errs++; mu.Unlock() }
	pair.OnLoad = func(*x509.Certificate) { mu.Lock(); loads++; mu.Unlock() }
	scfg, err := ServerWith(dir, RequireClientCert, pair)
	if err != nil {
		t.Fatal(err)
	}
	ccfg, err := Client(dir, ClientCert, ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", scfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	})
	served := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := served()
	if again := served(); again != first {
		t.Fatalf("unchanged files: serial %s then %s, want the same", first, again)
	}
	if _, err := CreateNode(dir, []string{"127.0.0.1"}, Options{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	rotated := parse(t, filepath.Join(dir, NodeCert)).SerialNumber.String()
	if got := served(); got != rotated || got == first {
		t.Fatalf("after rotation: served serial %s, want the new %s (old %s)", got, rotated, first)
	}
	good := mustRead(t, filepath.Join(dir, NodeCert))
	if err := os.WriteFile(filepath.Join(dir, NodeCert), good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != rotated {
		t.Errorf("half-written node.crt: served %s, want the last good %s", got, rotated)
	}
	served()
	if err := os.WriteFile(filepath.Join(dir, NodeCert), good, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != rotated {
		t.Errorf("node.crt whole again: served %s, want %s", got, rotated)
	}
	mu.Lock()
	defer mu.Unlock()
	if errs != 1 || loads != 2 {
		t.Errorf("got %d reload errors and %d reloads, want 1 (reported once) and 2 (rotation, repair)", errs, loads)
	}
}
