package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"ringkv/node/certs"
)

// probe is `kvnode health`: one GET of /readyz (or --path) on a node's admin port, for a
// container HEALTHCHECK that has no shell. Exit 0 when it answers 200, 1 otherwise, 2 for
// bad flags. With --certs-dir holding ca.crt the admin port is reached over HTTPS and its
// certificate checked against the CA (not against a host name: the probe targets loopback).
func probe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("kvnode health", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	admin := fset.String("admin", "127.0.0.1:7070", "admin address of the node")
	certsDir := fset.String("certs-dir", "", "the node's --certs-dir: HTTPS when it holds ca.crt")
	path := fset.String("path", "/readyz", "what to ask: /readyz (serving) or /healthz (alive)")
	timeout := fset.Duration("timeout", 3*time.Second, "deadline of the request")
	if code, stop := parseFlags(fset, args, "kvnode health", "usage: kvnode health [flags]   (exit 0 when the node answers 200)", stderr); stop {
		return code
	}
	client := &http.Client{Timeout: *timeout}
	scheme := "http"
	if *certsDir != "" {
		pool, err := certs.CAPool(*certsDir)
		switch {
		case err == nil:
			scheme = "https"
			client.Transport = &http.Transport{TLSClientConfig: caOnly(pool)}
		case !errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(stderr, "kvnode health: --certs-dir: %v\n", err)
			return 2
		}
	}
	url := scheme + "://" + *admin + *path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "kvnode health: %v\n", err)
		return 2
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "kvnode health: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	line := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "kvnode health: %s: %s %s\n", url, resp.Status, line)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s\n", url, line)
	return 0
}

// caOnly checks the server's chain against pool and nothing else.
func caOnly(pool *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // the chain is checked below, the name is not
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no server certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter})
			return err
		},
	}
}
