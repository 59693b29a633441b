package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"ringkv/node/auth"
	"ringkv/node/replica"
	"ringkv/proto/rpcerr"
)

func TestAuthorize(t *testing.T) {
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	remote := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 1}
	member := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 4), Port: 40000}
	tests := []struct {
		name   string
		secret string
		method string
		from   net.Addr
		sent   []string
		want   codes.Code
	}{
		{"kv open to all", "s3cret", "/ringkv.KV/Get", remote, nil, codes.OK},
		{"health open to all", "s3cret", "/grpc.health.v1.Health/Check", remote, nil, codes.OK},
		{"admin with secret", "s3cret", "/ringkv.Admin/Status", remote, []string{"s3cret"}, codes.OK},
		{"admin without secret", "s3cret", "/ringkv.Admin/Status", loopback, nil, codes.Unauthenticated},
		{"admin with wrong secret", "s3cret", "/ringkv.Admin/Status", loopback, []string{"guess"}, codes.PermissionDenied},
		{"replica with secret", "s3cret", "/ringkv.Replica/Write", remote, []string{"s3cret"}, codes.OK},
		{"replica without secret", "s3cret", "/ringkv.Replica/Write", remote, nil, codes.Unauthenticated},
		{"replica with prefix of secret", "s3cret", "/ringkv.Replica/Read", remote, []string{"s3cre"}, codes.PermissionDenied},
		{"cluster without secret", "s3cret", "/ringkv.Cluster/RaftStream", remote, nil, codes.Unauthenticated},
		{"no secret: admin from loopback", "", "/ringkv.Admin/NodeInfo", loopback, nil, codes.OK},
		{"no secret: admin from remote", "", "/ringkv.Admin/NodeInfo", remote, nil, codes.PermissionDenied},
		{"no secret: replica from a member", "", "/ringkv.Replica/Read", member, nil, codes.OK},
		{"no secret: replica from a stranger", "", "/ringkv.Replica/Read", remote, nil, codes.PermissionDenied},
		{"no secret: raft from a stranger", "", "/ringkv.Cluster/RaftStream", remote, nil, codes.PermissionDenied},
		{"no secret: replica from loopback", "", "/ringkv.Replica/Write", loopback, nil, codes.OK},
		{"no secret: replica without peer", "", "/ringkv.Replica/Read", nil, nil, codes.PermissionDenied},
		{"no secret: kv from a stranger", "", "/ringkv.KV/Put", remote, nil, codes.OK},
		{"no secret: admin without peer", "", "/ringkv.Admin/NodeInfo", nil, nil, codes.PermissionDenied},
	}
	isMember := func(ip net.IP) bool { return ip.Equal(member.IP) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ic := interceptors{logger: slog.New(slog.DiscardHandler), secret: []byte(tt.secret), member: isMember}
			ctx := context.Background()
			if tt.from != nil {
				ctx = peer.NewContext(ctx, &peer.Peer{Addr: tt.from})
			}
			if tt.sent != nil {
				ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(auth.Header, tt.sent[0]))
			}
			if got := status.Code(ic.authorize(ctx, tt.method)); got != tt.want {
				t.Errorf("authorize(%s) = %v, want %v", tt.method, got, tt.want)
			}
		})
	}
}

func TestRecoverInterceptor(t *testing.T) {
	ic := interceptors{logger: slog.New(slog.DiscardHandler)}
	_, err := ic.unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/ringkv.KV/Get"},
		func(context.Context, any) (any, error) { panic("boom") })
	if got := status.Code(err); got != codes.Internal {
		t.Errorf("got %v, want Internal", got)
	}
}

func TestErrorTable(t *testing.T) {
	tests := []struct {
		err      error
		wantGRPC codes.Code
		wantHTTP int
	}{
		{ErrNotFound, codes.NotFound, 404},
		{replica.ErrInvalidArgument, codes.InvalidArgument, 400},
		{replica.ErrKeyTooLarge, codes.InvalidArgument, 400},
		{replica.ErrValueTooLarge, codes.InvalidArgument, 413},
		{ErrUnknownPath, codes.InvalidArgument, 400},
		{ErrMethodNotAllowed, codes.Unimplemented, 405},
		{replica.ErrNotEnoughReplicas, codes.Unavailable, 504},
		{replica.ErrNotAdmitted, codes.Unavailable, 503},
		{context.DeadlineExceeded, codes.DeadlineExceeded, 504},
		{errors.New("mystery"), codes.Internal, 500},
	}
	for _, tt := range tests {
		if got := status.Code(rpcerr.Encode(tt.err)); got != tt.wantGRPC {
			t.Errorf("rpcerr.Encode(%v) = %v, want %v", tt.err, got, tt.wantGRPC)
		}
		if got := rpcerr.HTTPStatus(tt.err); got != tt.wantHTTP {
			t.Errorf("rpcerr.HTTPStatus(%v) = %d, want %d", tt.err, got, tt.wantHTTP)
		}
	}
}

// TestAuthorizeCertRoles: over mutual TLS, internal calls take a node certificate (CN
// "node", serverAuth); a client certificate (clientAuth only, even one named "node") is
// refused there and accepted on Admin and KV, with or without a cluster secret.
func TestAuthorizeCertRoles(t *testing.T) {
	remote := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 1}
	nodeCert := &x509.Certificate{Subject: pkix.Name{CommonName: "node"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	clientCert := &x509.Certificate{Subject: pkix.Name{CommonName: "root"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	namedNode := &x509.Certificate{Subject: pkix.Name{CommonName: "node"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	tests := []struct {
		name   string
		secret string
		method string
		cert   *x509.Certificate
		want   codes.Code
	}{
		{"node: replica", "", "/ringkv.Replica/Write", nodeCert, codes.OK},
		{"node: raft", "", "/ringkv.Cluster/RaftStream", nodeCert, codes.OK},
		{"client: replica", "", "/ringkv.Replica/Write", clientCert, codes.PermissionDenied},
		{"client: cluster", "", "/ringkv.Cluster/BeginChange", clientCert, codes.PermissionDenied},
		{"client named node: replica", "", "/ringkv.Replica/Read", namedNode, codes.PermissionDenied},
		{"client: admin", "", "/ringkv.Admin/Status", clientCert, codes.OK},
		{"client: kv", "", "/ringkv.KV/Put", clientCert, codes.OK},
		{"client with secret: replica", "s3cret", "/ringkv.Replica/Write", clientCert, codes.PermissionDenied},
		{"node with secret: replica", "s3cret", "/ringkv.Replica/Write", nodeCert, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ic := interceptors{logger: slog.New(slog.DiscardHandler), secret: []byte(tt.secret), member: func(net.IP) bool { return false }}
			info := credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{tt.cert}}}}
			ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: remote, AuthInfo: info})
			if tt.secret != "" {
				ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(auth.Header, tt.secret))
			}
			if got := status.Code(ic.authorize(ctx, tt.method)); got != tt.want {
				t.Errorf("authorize(%s) = %v, want %v", tt.method, got, tt.want)
			}
		})
	}
}
