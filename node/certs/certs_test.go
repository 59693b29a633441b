package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"ringkv/node/certs"
)

// mustCreate makes a CA, a node certificate for hosts and a client certificate in a temp dir.
func mustCreate(t *testing.T, hosts ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	if _, err := certs.CreateCA(dir, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.CreateNode(dir, hosts, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.CreateClient(dir, "root", certs.Options{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func leaf(t *testing.T, dir, file string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, file), filepath.Join(dir, map[string]string{certs.NodeCert: certs.NodeKey, certs.ClientCert: certs.ClientKey, certs.CACert: certs.CAKey}[file]))
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The node certificate carries the hosts as SANs and verifies against the CA for both
// server and client use; the client certificate for client use only.
func TestCreateVerifies(t *testing.T) {
	dir := mustCreate(t, "n1", "*.ringkv.default.svc.cluster.local", "127.0.0.1")
	pool, err := certs.CAPool(dir)
	if err != nil {
		t.Fatal(err)
	}
	node := leaf(t, dir, certs.NodeCert)
	if got := node.DNSNames; len(got) != 2 || got[0] != "n1" {
		t.Errorf("got DNS SANs %q, want [n1 *.ringkv.default.svc.cluster.local]", got)
	}
	if got := node.IPAddresses; len(got) != 1 || !got[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("got IP SANs %v, want [127.0.0.1]", got)
	}
	for _, tc := range []struct {
		name, file, host string
		usage            x509.ExtKeyUsage
		ok               bool
	}{
		{"node as server by name", certs.NodeCert, "n1", x509.ExtKeyUsageServerAuth, true},
		{"node as server by wildcard", certs.NodeCert, "ringkv-0.ringkv.default.svc.cluster.local", x509.ExtKeyUsageServerAuth, true},
		{"node as server by IP", certs.NodeCert, "127.0.0.1", x509.ExtKeyUsageServerAuth, true},
		{"node as server, other host", certs.NodeCert, "n9", x509.ExtKeyUsageServerAuth, false},
		{"node as peer client", certs.NodeCert, "", x509.ExtKeyUsageClientAuth, true},
		{"client as client", certs.ClientCert, "", x509.ExtKeyUsageClientAuth, true},
		{"client as server", certs.ClientCert, "", x509.ExtKeyUsageServerAuth, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := leaf(t, dir, tc.file).Verify(x509.VerifyOptions{Roots: pool, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.usage}})
			if got := err == nil; got != tc.ok {
				t.Errorf("got verified %v (%v), want %v", got, err, tc.ok)
			}
		})
	}
	if got := leaf(t, dir, certs.ClientCert).Subject.CommonName; got != "root" {
		t.Errorf("got client CN %q, want root", got)
	}
	for _, f := range []string{certs.CAKey, certs.NodeKey, certs.ClientKey} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != 0o600 {
			t.Errorf("%s: got mode %v, want 0600", f, got)
		}
	}
}

// Existing keys are never overwritten without Overwrite; with it they are replaced.
func TestCreateRefusesOverwrite(t *testing.T) {
	dir := mustCreate(t, "n1")
	before, _ := os.ReadFile(filepath.Join(dir, certs.NodeKey))
	if _, err := certs.CreateCA(dir, certs.Options{}); !errors.Is(err, certs.ErrExists) {
		t.Errorf("create-ca again: got %v, want ErrExists", err)
	}
	if _, err := certs.CreateNode(dir, []string{"n2"}, certs.Options{}); !errors.Is(err, certs.ErrExists) {
		t.Errorf("create-node again: got %v, want ErrExists", err)
	}
	if _, err := certs.CreateClient(dir, "root", certs.Options{}); !errors.Is(err, certs.ErrExists) {
		t.Errorf("create-client again: got %v, want ErrExists", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, certs.NodeKey)); string(after) != string(before) {
		t.Error("node.key changed after a refused create-node")
	}
	if _, err := certs.CreateNode(dir, []string{"n2"}, certs.Options{Overwrite: true}); err != nil {
		t.Fatalf("create-node --overwrite: %v", err)
	}
	if got := leaf(t, dir, certs.NodeCert).DNSNames; len(got) != 1 || got[0] != "n2" {
		t.Errorf("got SANs %q after overwrite, want [n2]", got)
	}
}

// Node and client certificates need the CA first.
func TestCreateNeedsCA(t *testing.T) {
	dir := t.TempDir()
	if _, err := certs.CreateNode(dir, []string{"n1"}, certs.Options{}); err == nil {
		t.Error("create-node without a CA: got nil error, want one")
	}
	if _, err := certs.CreateNode(dir, nil, certs.Options{}); err == nil {
		t.Error("create-node without hosts: got nil error, want one")
	}
}

// A TLS handshake between a Server config and a Client config of the same directory
// succeeds; a client without a certificate is refused by RequireClientCert.
func TestHandshake(t *testing.T) {
	dir := mustCreate(t, "127.0.0.1")
	for _, tc := range []struct {
		name     string
		mode     certs.Mode
		withCert bool
		ok       bool
	}{
		{"mutual", certs.RequireClientCert, true, true},
		{"no client cert, required", certs.RequireClientCert, false, false},
		{"no client cert, optional", certs.OptionalClientCert, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scfg, err := certs.Server(dir, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			ccfg, err := certs.Client(dir, certs.ClientCert, certs.ClientKey)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.withCert {
				ccfg.GetClientCertificate = nil
			}
			ln, err := tls.Listen("tcp", "127.0.0.1:0", scfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			srvErr := make(chan error, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					srvErr <- err
					return
				}
				defer c.Close()
				err = c.(*tls.Conn).Handshake()
				if err == nil {
					_, err = c.Write([]byte("x"))
				}
				srvErr <- err
			}()
			c, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
			if err == nil {
				// TLS 1.3: the server's verdict on the client certificate arrives with the
				// first read.
				_, err = c.Read(make([]byte, 1))
				c.Close()
			}
			serr := <-srvErr
			if got := err == nil && serr == nil; got != tc.ok {
				t.Errorf("got handshake ok %v (client %v, server %v), want %v", got, err, serr, tc.ok)
			}
		})
	}
}
