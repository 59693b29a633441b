package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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
// checked against ca.crt as mode says. The certificate is reloaded when its files change
// (see Pair): replace node.crt and node.key to rotate it, with no restart.
func Server(dir string, mode Mode) (*tls.Config, error) {
	pair, err := NewPair(dir, NodeCert, NodeKey)
	if err != nil {
		return nil, err
	}
	return ServerWith(dir, mode, pair)
}

// ServerWith is Server serving pair's certificate.
func ServerWith(dir string, mode Mode, pair *Pair) (*tls.Config, error) {
	pool, err := CAPool(dir)
	if err != nil {
		return nil, err
	}
	auth := tls.RequireAndVerifyClientCert
	if mode == OptionalClientCert {
		auth = tls.VerifyClientCertIfGiven
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: pair.GetCertificate,
		ClientCAs:      pool,
		ClientAuth:     auth,
	}, nil
}

// Client returns the TLS config of a client: servers checked against ca.crt, and the
// certificate certFile/keyFile of dir presented (NodeCert/NodeKey for a node dialing its
// peers, ClientCert/ClientKey for kvctl), reloaded when its files change (see Pair).
func Client(dir, certFile, keyFile string) (*tls.Config, error) {
	pair, err := NewPair(dir, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return ClientWith(dir, pair)
}

// ClientWith is Client presenting pair's certificate.
func ClientWith(dir string, pair *Pair) (*tls.Config, error) {
	pool, err := CAPool(dir)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, GetClientCertificate: pair.GetClientCertificate}, nil
}

// Pair is a certificate and key loaded from two files and reloaded when they change: every
// handshake reads both files (a few KiB; handshakes are rare, connections long-lived) and
// parses them again when their bytes differ from the last load. A pair that does not load
// (a half-written rotation, a key that does not match) is reported once through OnError and
// the last good certificate stays in use. Safe for concurrent use.
type Pair struct {
	dir, certFile, keyFile string
	// OnError, when set, is told of a reload that failed, and OnLoad of one that worked (set
	// them before the first handshake; called under the Pair's lock, they must not block).
	OnError func(error)
	OnLoad  func(*x509.Certificate)

	mu       sync.Mutex
	crt, key []byte // the files' bytes at the last attempt
	cert     *tls.Certificate
}

// NewPair loads certFile and keyFile of dir.
func NewPair(dir, certFile, keyFile string) (*Pair, error) {
	p := &Pair{dir: dir, certFile: certFile, keyFile: keyFile}
	if _, err := p.current(); err != nil {
		return nil, err
	}
	return p, nil
}

// current returns the certificate, reloaded first when the files changed.
func (p *Pair) current() (*tls.Certificate, error) {
	crt, cerr := os.ReadFile(filepath.Join(p.dir, p.certFile))
	key, kerr := os.ReadFile(filepath.Join(p.dir, p.keyFile))
	p.mu.Lock()
	defer p.mu.Unlock()
	if cerr == nil && kerr == nil && p.cert != nil && bytes.Equal(crt, p.crt) && bytes.Equal(key, p.key) {
		return p.cert, nil
	}
	if p.cert != nil && bytes.Equal(crt, p.crt) && bytes.Equal(key, p.key) {
		return p.cert, nil // unchanged since a failed attempt: already reported
	}
	p.crt, p.key = crt, key
	err := errors.Join(cerr, kerr)
	if err == nil {
		var pair tls.Certificate
		if pair, err = tls.X509KeyPair(crt, key); err == nil {
			reload := p.cert != nil
			p.cert = &pair
			if reload && p.OnLoad != nil && pair.Leaf != nil {
				p.OnLoad(pair.Leaf)
			}
			return p.cert, nil
		}
	}
	err = fmt.Errorf("certs: %s/%s: %w", filepath.Join(p.dir, p.certFile), p.keyFile, err)
	if p.cert == nil {
		return nil, err
	}
	if p.OnError != nil {
		p.OnError(fmt.Errorf("%w; still using the previous certificate", err))
	}
	return p.cert, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return p.current() }

// GetClientCertificate is tls.Config.GetClientCertificate.
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.current()
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
