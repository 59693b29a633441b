// Package server holds a ringkv node's network front: the gRPC builder with its
// interceptors (recover, logging, metrics, auth) and the health service, the thin KV,
// Replica and Admin handlers, and the course's v0 HTTP API. It is transport only: handlers
// check a request's form, call the domain (replica.Coordinator, replica.Local, change.Service,
// metrics) and map errors through one table (errors.go); no rule about a ring, a disk or a
// quorum lives here.
package server

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"ringkv/node/auth"
	"ringkv/node/certs"
	"ringkv/proto/kvpb"
)

// RPCObserver receives one call per finished RPC, for metrics. Implementations must be
// safe for concurrent use and must not block.
type RPCObserver interface {
	ObserveRPC(method string, code codes.Code, d time.Duration)
}

// GRPCConfig configures NewGRPC.
type GRPCConfig struct {
	// Logger gets one debug line per RPC (method, code, duration) and an error line per
	// panic. Never values or secrets. nil = slog.Default().
	Logger *slog.Logger
	// Secret, when non-empty, is required in auth.Header for the Admin, Replica and
	// Cluster services. When empty, Admin calls are accepted from loopback peers only.
	Secret string
	// Observer, when set, is told about every RPC.
	Observer RPCObserver
	// Creds, when set, are the transport credentials (mutual TLS): a verified client
	// certificate then authorizes Admin calls from any address (the Secret, when set, is
	// still required). nil = plaintext.
	Creds credentials.TransportCredentials
	// Member, when set, tells whether an address is a ring member's. With neither a Secret
	// nor Creds, internal (Replica, Cluster) calls are accepted only from members and
	// loopback; nil accepts them from anyone. Safe for concurrent use, cheap.
	Member func(ip net.IP) bool
	// Options are appended to the server options (e.g. message size limits).
	Options []grpc.ServerOption
}

// StreamWindow and ConnWindow are the fixed HTTP/2 flow-control windows of the node's gRPC
// server and of its connections to peers, per stream and per connection. Fixed windows turn
// off gRPC-go's bandwidth-delay estimator, which sends a PING (and gets an ack: two write
// syscalls) on data received while none is outstanding — at low load, on every replica batch
// message. 1 MiB per stream holds a range stream's 1 MiB chunk in one window; the estimator
// would not grow them past 16 MiB, which a LAN does not need.
const (
	StreamWindow = 1 << 20
	ConnWindow   = 4 << 20
)

// MaxConcurrentStreams bounds the streams (calls in flight) of one client connection; a
// client past it waits for one to end.
const MaxConcurrentStreams = 1024

// NewGRPC returns a gRPC server with the interceptor chain recover → logging → metrics →
// auth, keepalive enforcement, a limit of MaxConcurrentStreams per connection, and the
// standard health service registered (reporting SERVING for "" until the returned health
// server is told otherwise).
func NewGRPC(cfg GRPCConfig) (*grpc.Server, *health.Server) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	ic := interceptors{logger: logger.With("component", "grpc"), secret: []byte(cfg.Secret), obs: cfg.Observer, member: cfg.Member}
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(ic.unary),
		grpc.ChainStreamInterceptor(ic.stream),
		// A connection that pings more often than every 10s is closed (too_many_pings); one
		// idle for 5m is closed, one that stops answering pings is dropped after 30s+10s.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute, Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.InitialWindowSize(StreamWindow),
		grpc.InitialConnWindowSize(ConnWindow),
	}
	if cfg.Creds != nil {
		opts = append(opts, grpc.Creds(cfg.Creds))
	}
	opts = append(opts, cfg.Options...)
	s := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	return s, hs
}

type interceptors struct {
	logger *slog.Logger
	secret []byte
	obs    RPCObserver
	member func(ip net.IP) bool
}

func (ic interceptors) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			err = ic.panicked(info.FullMethod, p)
		}
		ic.finish(info.FullMethod, start, err)
	}()
	if err := ic.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	if strings.HasPrefix(info.FullMethod, "/"+kvpb.Admin_ServiceDesc.ServiceName+"/") {
		var cancel context.CancelFunc
		ctx, cancel = answerBeforeDeadline(ctx)
		defer cancel()
	}
	return handler(ctx, req)
}

// answerBeforeDeadline gives an Admin handler a deadline a little before its caller's, so
// that a handler still waiting (for a raft leader, a journal entry, a peer) answers with what
// it waited for — "no raft leader (context deadline exceeded)" — before the caller gives up.
// Without it, the caller's own deadline came first and kvctl or the console showed only
// "deadline exceeded: stream terminated by RST_STREAM" (seen at a load average of 60). The
// margin is a tenth of the time left, at most a second.
func answerBeforeDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	margin := min(time.Until(dl)/10, time.Second)
	if margin <= 0 {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, dl.Add(-margin))
}

func (ic interceptors) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			err = ic.panicked(info.FullMethod, p)
		}
		ic.finish(info.FullMethod, start, err)
	}()
	if err := ic.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

func (ic interceptors) panicked(method string, p any) error {
	ic.logger.Error("panic in handler", "method", method, "panic", p, "stack", string(debug.Stack()))
	return status.Error(codes.Internal, "internal error")
}

func (ic interceptors) finish(method string, start time.Time, err error) {
	d := time.Since(start)
	code := status.Code(err)
	if ic.obs != nil {
		ic.obs.ObserveRPC(method, code, d)
	}
	level := slog.LevelDebug
	if code == codes.Internal || code == codes.Unknown {
		level = slog.LevelWarn
	}
	ic.logger.Log(context.Background(), level, "rpc", "method", method, "code", code.String(), "duration", d)
}

// authorize applies the cluster-secret rule to one call.
func (ic interceptors) authorize(ctx context.Context, method string) error {
	internal := strings.HasPrefix(method, "/ringkv.Replica/") || strings.HasPrefix(method, "/ringkv.Cluster/")
	admin := strings.HasPrefix(method, "/ringkv.Admin/")
	if !internal && !admin {
		return nil
	}
	// With TLS, internal calls take a node certificate: a client certificate (kvctl's) is
	// good for the KV and Admin APIs but cannot pass for a peer.
	if leaf := tlsLeaf(ctx); internal && leaf != nil && !certs.IsNode(leaf) {
		return status.Errorf(codes.PermissionDenied, "internal calls need a node certificate; this one is a client certificate (%q)", leaf.Subject.CommonName)
	}
	if len(ic.secret) == 0 {
		if admin && !fromLoopback(ctx) && !verifiedCert(ctx) {
			return status.Error(codes.PermissionDenied, "admin calls without a cluster secret or a client certificate are accepted from loopback only")
		}
		if internal && ic.member != nil && !fromLoopback(ctx) && !verifiedCert(ctx) && !ic.member(peerIP(ctx)) {
			return status.Error(codes.PermissionDenied, "internal calls without a cluster secret or TLS are accepted from ring members and loopback only")
		}
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	got := md.Get(auth.Header)
	if len(got) == 0 {
		return status.Error(codes.Unauthenticated, "missing cluster secret")
	}
	if subtle.ConstantTimeCompare([]byte(got[0]), ic.secret) != 1 {
		return status.Error(codes.PermissionDenied, "wrong cluster secret")
	}
	return nil
}

// verifiedCert tells whether the caller presented a client certificate that mutual TLS
// verified against the cluster CA.
func verifiedCert(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && len(info.State.VerifiedChains) > 0
}

// tlsLeaf is the caller's certificate as mutual TLS verified it against the cluster CA
// (nil: no TLS, or no verified certificate).
func tlsLeaf(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

// peerIP is the caller's IP address (nil when unknown).
func peerIP(ctx context.Context) net.IP {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil
	}
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		return a.IP
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		return nil
	}
	return net.ParseIP(host)
}

func fromLoopback(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return false
	}
	switch a := p.Addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
