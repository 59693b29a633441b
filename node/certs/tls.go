package certs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
)

// Mode is how a server treats client certificates.
type Mode int

const (
	// RequireClientCert: every client presents a certificate signed by the CA (gRPC: clients,
	// peers, raft, admin).
	RequireClientCert Mode = iota
	// OptionalClientCert: a certificate is verified when presented (the client HTTP API).
	OptionalClientCert
)

// Server returns the TLS config a node serves with: node.crt/node.key, client certificates
// checked against ca.crt as mode says.
func Server(dir string, mode Mode) (*tls.Config, error) {
	pool, err := CAPool(dir)
	if err != nil {
		return nil, err
	}
	pair, err := loadPair(dir, NodeCert, NodeKey)
	if err != nil {
		return nil, err
	}
	auth := tls.RequireAndVerifyClientCert
	if mode == OptionalClientCert {
		auth = tls.VerifyClientCertIfGiven
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		ClientCAs:    pool,
		ClientAuth:   auth,
	}, nil
}

// Client returns the TLS config of a client: servers checked against ca.crt, and the
// certificate certFile/keyFile of dir presented (NodeCert/NodeKey for a node dialing its
// peers, ClientCert/ClientKey for kvctl).
func Client(dir, certFile, keyFile string) (*tls.Config, error) {
	pool, err := CAPool(dir)
	if err != nil {
		return nil, err
	}
	pair, err := loadPair(dir, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{pair}}, nil
}

// CAPool returns the pool holding dir's ca.crt (for a client that presents no certificate).
func CAPool(dir string) (*x509.CertPool, error) {
	path := filepath.Join(dir, CACert)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("certs: %s holds no PEM certificate", path)
	}
	return pool, nil
}

func loadPair(dir, certFile, keyFile string) (tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: %s/%s: %w", filepath.Join(dir, certFile), keyFile, err)
	}
	return pair, nil
}
