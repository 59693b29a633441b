package node_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"ringkv/internal/certtest"
	"ringkv/internal/eventually"
	"ringkv/node"
	"ringkv/node/certs"
	"ringkv/proto/kvpb"
)

// TestTLSCluster: three founders with --certs-dir elect a leader and replicate over mutual
// TLS (a write with ack=3 needs every peer); the HTTP API serves HTTPS to a client that
// presents no certificate and answers plaintext with 400; gRPC answers a client with the
// client certificate and refuses plaintext and certificate-less clients.
func TestTLSCluster(t *testing.T) {
	dir := certtest.Dir(t)
	c := startChangeCluster(t, 3, func(cfg *node.Config) { cfg.CertsDir = dir })
	pool, err := certs.CAPool(dir)
	if err != nil {
		t.Fatal(err)
	}
	https := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(https.CloseIdleConnections)
	httpAddr := c.Config(0).HTTPAddr
	eventually.Succeeds(t, 15*time.Second, func() error {
		resp, err := https.Do(mustRequest(t, "PUT", "https://"+httpAddr+"/v0/entity?id=k&ack=3", "v"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return errors.New("PUT ack=3 over HTTPS: got " + resp.Status + ", want 201")
		}
		return nil
	})
	resp, err := https.Do(mustRequest(t, "GET", "https://"+c.Config(2).HTTPAddr+"/v0/entity?id=k&ack=3", ""))
	if err != nil {
		t.Fatalf("GET over HTTPS: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "v" {
		t.Errorf("GET ack=3 over HTTPS: got %d %q, want 200 \"v\"", resp.StatusCode, b)
	}
	got := doURL(t, "http://"+httpAddr+"/v0/status", "GET", nil)
	if got.code != http.StatusBadRequest || !strings.Contains(got.body, "HTTP request to an HTTPS server") {
		t.Errorf("plaintext HTTP: got %d %q, want 400 \"Client sent an HTTP request to an HTTPS server\"", got.code, got.body)
	}

	addr := c.Config(0).GRPCAddr
	clientTLS, err := certs.Client(dir, certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	noCert := &tls.Config{RootCAs: pool}
	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		ok    bool
	}{
		{"client certificate", credentials.NewTLS(clientTLS), true},
		{"plaintext", insecure.NewCredentials(), false},
		{"TLS without a client certificate", credentials.NewTLS(noCert), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tc.creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			st, err := kvpb.NewAdminClient(conn).Status(ctx, &kvpb.StatusRequest{})
			if got := err == nil; got != tc.ok {
				t.Fatalf("Admin.Status: got ok %v (%v), want %v", got, err, tc.ok)
			}
			if err != nil {
				return
			}
			for _, n := range st.GetNodes() {
				if n.GetError() != "" {
					t.Errorf("node %s: got error %q, want none (peers reach each other over TLS)", n.GetId(), n.GetError())
				}
			}
		})
	}
}

// TestTLSCertRoles: with mutual TLS, kvctl's client certificate is good for the KV and
// Admin APIs but not for the internal Replica and Cluster RPCs, which take a node
// certificate: a Replica.Write presented with the client certificate is refused with
// PermissionDenied and not stored (a read with the node certificate still finds the
// acknowledged PUT's value).
func TestTLSCertRoles(t *testing.T) {
	dir := certtest.Dir(t)
	c := startChangeCluster(t, 3, func(cfg *node.Config) { cfg.CertsDir = dir })
	dial := func(certFile, keyFile string) *grpc.ClientConn {
		t.Helper()
		cfg, err := certs.Client(dir, certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(c.Config(0).GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	asClient, asNode := dial(certs.ClientCert, certs.ClientKey), dial(certs.NodeCert, certs.NodeKey)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	eventually.Succeeds(t, 15*time.Second, func() error {
		_, err := kvpb.NewKVClient(asClient).Put(ctx, &kvpb.PutRequest{Key: []byte("role"), Value: []byte("acknowledged"), Ack: 3})
		return err
	})
	if _, err := kvpb.NewAdminClient(asClient).NodeInfo(ctx, &kvpb.NodeInfoRequest{}); err != nil {
		t.Errorf("Admin.NodeInfo with the client certificate: %v, want accepted", err)
	}
	rr, err := kvpb.NewReplicaClient(asNode).Read(ctx, &kvpb.ReadRequest{Key: []byte("role")})
	if err != nil {
		t.Fatalf("Replica.Read with the node certificate: %v, want accepted", err)
	}
	epoch := rr.GetEpoch()
	ts := uint64(time.Now().Add(200*time.Millisecond).UnixMilli()) << 16 // newer than the PUT, within the clock bound: it would win
	_, err = kvpb.NewReplicaClient(asClient).Write(ctx, &kvpb.WriteRequest{Key: []byte("role"), Record: &kvpb.Record{Timestamp: ts, Value: []byte("forged")}, Epoch: epoch})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "node certificate") {
		t.Errorf("Replica.Write with the client certificate: got %v, want PermissionDenied saying a node certificate is needed", err)
	}
	if _, err := kvpb.NewClusterClient(asClient).SetRate(ctx, &kvpb.SetRateRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Cluster.SetRate with the client certificate: got %v, want PermissionDenied", err)
	}
	rr, err = kvpb.NewReplicaClient(asNode).Read(ctx, &kvpb.ReadRequest{Key: []byte("role"), Epoch: epoch})
	if err != nil || string(rr.GetRecord().GetValue()) != "acknowledged" {
		t.Errorf("after the refused write: read %q (%v), want \"acknowledged\"", rr.GetRecord().GetValue(), err)
	}
}

// TestTLSRotation: a node started with --certs-dir serves a replaced node.crt/node.key from
// the next handshake on, on its gRPC and HTTPS ports, with no restart; its peers still
// accept it (a write with ack=3 through it succeeds over the new connections).
func TestTLSRotation(t *testing.T) {
	dir := certtest.Dir(t)
	c := startChangeCluster(t, 3, func(cfg *node.Config) { cfg.CertsDir = dir })
	pool, err := certs.CAPool(dir)
	if err != nil {
		t.Fatal(err)
	}
	served := func(addr string) string {
		t.Helper()
		cfg, err := certs.Client(dir, certs.ClientCert, certs.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatalf("TLS handshake with %s: %v", addr, err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	grpcAddr, httpAddr := c.Config(0).GRPCAddr, c.Config(0).HTTPAddr
	before := served(grpcAddr)
	if _, err := certs.CreateNode(dir, []string{"127.0.0.1"}, certs.Options{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{grpcAddr, httpAddr} {
		if after := served(addr); after == before {
			t.Errorf("%s after rotation: served serial %s, want a new one", addr, after)
		}
	}
	https := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(https.CloseIdleConnections)
	eventually.Succeeds(t, 15*time.Second, func() error {
		resp, err := https.Do(mustRequest(t, "PUT", "https://"+httpAddr+"/v0/entity?id=rotated&ack=3", "v"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return errors.New("PUT ack=3 after rotation: got " + resp.Status + ", want 201")
		}
		return nil
	})
}

func mustRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}
