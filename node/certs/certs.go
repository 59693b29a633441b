// Package certs is ringkv's mutual TLS, the CockroachDB way: one directory holding a CA
// (ca.crt, ca.key), a node certificate (node.crt, node.key) that nodes serve with and present
// to their peers, and a client certificate (client.crt, client.key) that kvctl presents.
// It creates those files (kvctl cert) and loads them into tls.Configs (kvnode, kvctl).
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The file names in a certs directory.
const (
	CACert     = "ca.crt"
	CAKey      = "ca.key"
	NodeCert   = "node.crt"
	NodeKey    = "node.key"
	ClientCert = "client.crt"
	ClientKey  = "client.key"
)

// Lifetimes of what Create* writes (CockroachDB's defaults).
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	CertLifetime = 5 * 365 * 24 * time.Hour
)

// NodeCommonName is the common name of every node certificate. A client certificate cannot
// take it (CreateClient refuses), and a node certificate is also the only kind with the
// serverAuth usage: internal RPCs (IsNode) check both.
const NodeCommonName = "node"

// ErrReservedUser is returned by CreateClient for the node's common name.
var ErrReservedUser = errors.New(`user "node" is reserved for node certificates`)

// IsNode tells whether c is a node certificate: common name NodeCommonName and usable as a
// server (client certificates are for client use only). The caller has verified c against
// the CA.
func IsNode(c *x509.Certificate) bool {
	if c == nil || c.Subject.CommonName != NodeCommonName {
		return false
	}
	for _, u := range c.ExtKeyUsage {
		if u == x509.ExtKeyUsageServerAuth {
			return true
		}
	}
	return false
}

// ErrExists is returned when a file would be overwritten without Options.Overwrite.
var ErrExists = errors.New("already exists (use --overwrite to replace it)")

// Options tune Create*.
type Options struct {
	// Overwrite replaces existing certificates and keys.
	Overwrite bool
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// CreateCA writes a new CA (ca.crt, ca.key) into dir, creating dir if needed. It returns the
// paths written.
func CreateCA(dir string, o Options) ([]string, error) {
	crt, key := filepath.Join(dir, CACert), filepath.Join(dir, CAKey)
	if err := refuse(o, crt, key); err != nil {
		return nil, err
	}
	tmpl := template(o, "ringkv CA", CALifetime)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	return write(dir, crt, key, tmpl, nil, nil)
}

// CreateNode writes node.crt and node.key, signed by the CA in dir, valid for the given hosts
// (DNS names, wildcards such as *.ringkv.default.svc.cluster.local, or IP addresses) as a
// server and as a client (nodes present it to their peers).
func CreateNode(dir string, hosts []string, o Options) ([]string, error) {
	if len(hosts) == 0 {
		return nil, errors.New("create-node: want at least one HOST (a DNS name or an IP address)")
	}
	return createSigned(dir, NodeCert, NodeKey, NodeCommonName, hosts, o, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
}

// CreateClient writes client.crt and client.key (common name user), signed by the CA in dir,
// for client use only: nodes accept it on the KV and Admin APIs, never on their internal
// Replica and Cluster RPCs.
func CreateClient(dir, user string, o Options) ([]string, error) {
	if user == "" {
		return nil, errors.New("create-client: want a user name (--user)")
	}
	if user == NodeCommonName {
		return nil, fmt.Errorf("create-client --user %q: %w", user, ErrReservedUser)
	}
	return createSigned(dir, ClientCert, ClientKey, user, nil, o, x509.ExtKeyUsageClientAuth)
}

// createSigned writes certFile and keyFile into dir: a certificate for cn and hosts with the
// given usages, signed by the CA in dir.
func createSigned(dir, certFile, keyFile, cn string, hosts []string, o Options, usages ...x509.ExtKeyUsage) ([]string, error) {
	crt, key := filepath.Join(dir, certFile), filepath.Join(dir, keyFile)
	if err := refuse(o, crt, key); err != nil {
		return nil, err
	}
	ca, caKey, err := loadCA(dir)
	if err != nil {
		return nil, err
	}
	tmpl := template(o, cn, CertLifetime)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.ExtKeyUsage = usages
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return write(dir, crt, key, tmpl, ca, caKey)
}

// refuse reports ErrExists for the first of paths that exists, unless o.Overwrite.
func refuse(o Options, paths ...string) error {
	if o.Overwrite {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s: %w", p, ErrExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func template(o Options, cn string, life time.Duration) *x509.Certificate {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	now := o.now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"ringkv"}},
		// An hour back: a clock a little behind on another host still accepts it.
		NotBefore: now.Add(-time.Hour),
		NotAfter:  now.Add(life),
	}
}

// write creates a key, signs tmpl with parent (nil = self-signed) and writes the certificate
// (0644) and the key (0600).
func write(dir, crtPath, keyPath string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) ([]string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", crtPath, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := writePEM(keyPath, "PRIVATE KEY", keyDER, 0o600); err != nil {
		return nil, err
	}
	if err := writePEM(crtPath, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return []string{crtPath, keyPath}, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	// Remove first: an existing file keeps its mode on O_TRUNC, and a key must be 0600.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: der}); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// loadCA reads ca.crt and ca.key from dir.
func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CACert), filepath.Join(dir, CAKey))
	if err != nil {
		return nil, nil, fmt.Errorf("load the CA (run kvctl cert create-ca first): %w", err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", CACert, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("%s: want an ECDSA key, got %T", CAKey, pair.PrivateKey)
	}
	return ca, key, nil
}
