package node

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"

	"google.golang.org/grpc/credentials"

	"ringkv/node/certs"
	"ringkv/node/server"
)

// nodeTLS is a node's mutual TLS, loaded from --certs-dir: what its gRPC port serves with
// (client certificates required), what its HTTP and admin ports serve with (client
// certificates verified when given), and what it presents when it dials a peer.
type nodeTLS struct {
	grpc, http, peer *tls.Config
}

// loadTLS reads cfg.CertsDir; nil when none is configured (plaintext). The node certificate
// is one certs.Pair for every port and every peer connection: a new node.crt/node.key is
// used from the next handshake on (rotation without a restart), and a pair that does not
// load is logged while the previous one stays in use.
func loadTLS(cfg Config, logger *slog.Logger) (*nodeTLS, error) {
	if cfg.CertsDir == "" {
		return nil, nil
	}
	pair, err := certs.NewPair(cfg.CertsDir, certs.NodeCert, certs.NodeKey)
	if err != nil {
		return nil, err
	}
	pair.OnError = func(err error) { logger.Warn("node certificate not reloaded", "err", err) }
	pair.OnLoad = func(c *x509.Certificate) {
		logger.Info("node certificate reloaded", "serial", c.SerialNumber.Text(16), "not_after", c.NotAfter)
	}
	var t nodeTLS
	if t.grpc, err = certs.ServerWith(cfg.CertsDir, certs.RequireClientCert, pair); err != nil {
		return nil, err
	}
	if t.http, err = certs.ServerWith(cfg.CertsDir, certs.OptionalClientCert, pair); err != nil {
		return nil, err
	}
	if t.peer, err = certs.ClientWith(cfg.CertsDir, pair); err != nil {
		return nil, err
	}
	return &t, nil
}

// listener wraps an HTTP listener in TLS (nil t: ln as is).
func (t *nodeTLS) listener(ln net.Listener) net.Listener {
	if t == nil {
		return ln
	}
	return tls.NewListener(ln, t.http)
}

// clientListener wraps the client API's listener in TLS (nil t: ln as is), answering
// plaintext HTTP with a 400 as net/http does on the admin port.
func (t *nodeTLS) clientListener(ln net.Listener) net.Listener {
	if t == nil {
		return ln
	}
	return server.HTTPSListener(ln, t.http)
}

// serverCreds are the gRPC server's transport credentials (nil t: none, plaintext). A
// refused handshake (plaintext, no client certificate, another CA) is logged with its
// reason and the peer's address.
func (t *nodeTLS) serverCreds(logger *slog.Logger) credentials.TransportCredentials {
	if t == nil {
		return nil
	}
	return loggedCreds{credentials.NewTLS(t.grpc), logger}
}

// peerCreds are the credentials of connections to peers (nil t: none, plaintext).
func (t *nodeTLS) peerCreds() credentials.TransportCredentials {
	if t == nil {
		return nil
	}
	return credentials.NewTLS(t.peer)
}

// loggedCreds logs the server handshakes it refuses.
type loggedCreds struct {
	credentials.TransportCredentials
	logger *slog.Logger
}

func (c loggedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.logger.Info("tls handshake refused", "remote", conn.RemoteAddr().String(), "err", err)
	}
	return out, info, err
}

func (c loggedCreds) Clone() credentials.TransportCredentials {
	return loggedCreds{c.TransportCredentials.Clone(), c.logger}
}
