package replica

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
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

// callOptions are the options of one call to the peer. A connection that is not
// ready (idle, or waiting out its reconnect backoff after the peer went away) is
// woken and the call waits for it within its deadline instead of failing at once
// with the last connection error: a peer that is back is used by the first call
// (see unreached for a call that never got a connection).
func (r *Remote) callOptions() []grpc.CallOption {
	if r.cc == nil || r.cc.GetState() == connectivity.Ready {
		return nil
	}
	wake(r.cc)
	return waitForReady
}

var waitForReady = []grpc.CallOption{grpc.WaitForReady(true)}

// unreached rewrites the error of a call that waited for a connection and ran out
// of time without one: the peer is not there (ErrReplicaUnavailable, evidence of
// death for its breaker), not slow.
func (r *Remote) unreached(opts []grpc.CallOption, err error) error {
	if len(opts) == 0 || status.Code(err) != codes.DeadlineExceeded || r.cc.GetState() == connectivity.Ready {
		return err
	}
	return fmt.Errorf("%w: no connection within the deadline (%s)", ErrReplicaUnavailable, status.Convert(err).Message())
}
