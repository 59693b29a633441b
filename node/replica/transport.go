package replica

import (
	"context"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
)

// Transport is what a peer's connection tells the coordinator without a
// client request: whether it is up, when that changes, and whether the peer
// answers a cheap probe. Remote over a *grpc.ClientConn implements it. Safe
// for concurrent use.
type Transport interface {
	// State returns the connection's state now.
	State() connectivity.State
	// WaitForStateChange blocks until the state differs from from, or ctx
	// ends (false).
	WaitForStateChange(ctx context.Context, from connectivity.State) bool
	// Wake makes an idle connection connect, and one waiting out its
	// reconnect backoff try again now.
	Wake()
	// Probe wakes the connection and sends one health check that waits for
	// the connection within ctx. nil means the peer answered: it is alive,
	// whatever its health status.
	Probe(ctx context.Context) error
}

// transporter is implemented by replicas that can hand the coordinator their
// Transport (nil when their connection cannot tell).
type transporter interface {
	Transport() Transport
}

// grpcConn is the part of *grpc.ClientConn a Transport needs.
type grpcConn interface {
	grpc.ClientConnInterface
	GetState() connectivity.State
	WaitForStateChange(ctx context.Context, from connectivity.State) bool
	Connect()
	ResetConnectBackoff()
}

// remoteTransport is a Remote's connection as a Transport.
type remoteTransport struct{ cc grpcConn }

var _ Transport = remoteTransport{}

// Transport returns r's connection as a Transport, or nil when r was built on
// a connection that cannot report its state.
func (r *Remote) Transport() Transport {
	if r.cc == nil {
		return nil
	}
	return remoteTransport{r.cc}
}

func (t remoteTransport) State() connectivity.State { return t.cc.GetState() }

func (t remoteTransport) WaitForStateChange(ctx context.Context, from connectivity.State) bool {
	return t.cc.WaitForStateChange(ctx, from)
}

func (t remoteTransport) Wake() { wake(t.cc) }

func (t remoteTransport) Probe(ctx context.Context) error {
	wake(t.cc)
	_, err := healthpb.NewHealthClient(t.cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if st, ok := status.FromError(err); ok && err != nil {
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			return err
		}
		return nil // it answered, if only to refuse
	}
	return err
}

// wake makes an idle connection connect and one in reconnect backoff retry now.
func wake(cc grpcConn) {
	switch cc.GetState() {
	case connectivity.Idle:
		cc.Connect()
	case connectivity.TransientFailure:
		cc.ResetConnectBackoff()
	}
}

// connectWait bounds how long a call on a connection that is not ready waits
// for one fresh connection attempt: long enough for a peer that is back (a
// connect on a LAN takes milliseconds), short enough that a request that needs
// a dead peer is not held for its whole deadline.
const connectWait = 250 * time.Millisecond

// await readies the connection for one call. A connection that is not ready
// (idle, or waiting out its reconnect backoff after the peer went away) is
// woken, and the call waits up to connectWait (within ctx) for it to come up:
// a peer that is back is used by the first call. If it does not come up but the
// peer's port accepts a TCP connection, the peer is back and only the handshake
// is slow (a busy machine): the call waits for it within ctx. Otherwise the
// call goes out anyway and fails at once with Unavailable, the evidence of
// death its breaker counts.
//
// The channel cannot tell the two apart: while it waits out a failure it stays
// in TRANSIENT_FAILURE during the fresh attempt too, and a call that goes out
// then fails with the previous attempt's error ("connection refused") although
// the peer listens again.
func (r *Remote) await(ctx context.Context) {
	if r.cc == nil || r.cc.GetState() == connectivity.Ready {
		return
	}
	wake(r.cc)
	wctx, cancel := context.WithTimeout(ctx, connectWait)
	ready := waitReady(wctx, r.cc)
	cancel()
	if ready || ctx.Err() != nil {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, connectWait)
	back := listening(dctx, r.cc)
	cancel()
	if back {
		waitReady(ctx, r.cc)
	}
}

// waitReady waits within ctx for cc to be ready, waking it whenever it falls idle.
func waitReady(ctx context.Context, cc grpcConn) bool {
	for st := cc.GetState(); st != connectivity.Ready; st = cc.GetState() {
		if !cc.WaitForStateChange(ctx, st) {
			return false
		}
		if cc.GetState() == connectivity.Idle {
			wake(cc)
		}
	}
	return true
}

// listening reports whether cc's target, a host:port, accepts a TCP connection
// within ctx: a peer that is gone refuses it at once (or lets ctx end).
func listening(ctx context.Context, cc grpcConn) bool {
	t, ok := cc.(interface{ Target() string })
	if !ok {
		return false
	}
	addr := t.Target()
	for _, scheme := range []string{"passthrough:///", "dns:///"} {
		addr = strings.TrimPrefix(addr, scheme)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return false
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

var _ linker = (*Remote)(nil)

// Links swaps link views with the peer (Replica.Links), waiting for the connection within ctx.
func (r *Remote) Links(ctx context.Context, mine *kvpb.LinkView) (*kvpb.LinkView, error) {
	resp, err := r.client.Links(ctx, &kvpb.LinksRequest{View: mine}, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	return resp.GetView(), nil
}
