package loadgen

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
)

// GRPCTarget sends requests through the KV gRPC service, one client connection per worker
// (worker w uses connection w mod the number of connections).
type GRPCTarget struct {
	clients   []kvpb.KVClient
	conns     []*grpc.ClientConn // owned; closed by Close
	ack, from uint32
}

var _ Target = (*GRPCTarget)(nil)

// NewGRPCTarget uses the given clients (not owned). ack and from of 0 mean the cluster's defaults.
func NewGRPCTarget(clients []kvpb.KVClient, ack, from uint32) *GRPCTarget {
	return &GRPCTarget{clients: clients, ack: ack, from: from}
}

// DialGRPCTarget opens n client connections to addr (each its own TCP connection). Close them
// with Close.
func DialGRPCTarget(addr string, n int, ack, from uint32, opts ...grpc.DialOption) (*GRPCTarget, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: connections %d: want >= 1", ErrInvalidConfig, n)
	}
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	t := &GRPCTarget{ack: ack, from: from}
	for range n {
		c, err := grpc.NewClient(addr, opts...)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		t.conns = append(t.conns, c)
		t.clients = append(t.clients, kvpb.NewKVClient(c))
	}
	return t, nil
}

// Close closes the connections the target opened.
func (t *GRPCTarget) Close() error {
	var errs []error
	for _, c := range t.conns {
		errs = append(errs, c.Close())
	}
	t.conns = nil
	return errors.Join(errs...)
}

func (t *GRPCTarget) client(conn int) kvpb.KVClient { return t.clients[conn%len(t.clients)] }

// Get implements Target.
func (t *GRPCTarget) Get(ctx context.Context, conn int, key string) Kind {
	_, err := t.client(conn).Get(ctx, &kvpb.GetRequest{Key: []byte(key), Ack: t.ack, From: t.from})
	return GRPCKind(ctx, err)
}

// Put implements Target.
func (t *GRPCTarget) Put(ctx context.Context, conn int, key string, value []byte) Kind {
	_, err := t.client(conn).Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: value, Ack: t.ack, From: t.from})
	return GRPCKind(ctx, err)
}

// Delete implements Target.
func (t *GRPCTarget) Delete(ctx context.Context, conn int, key string) Kind {
	_, err := t.client(conn).Delete(ctx, &kvpb.DeleteRequest{Key: []byte(key), Ack: t.ack, From: t.from})
	return GRPCKind(ctx, err)
}

// GRPCKind maps a KV RPC's error to its kind; every gRPC client of the KV API that counts
// errors (the bench, the demo's fill) classifies them here. ctx tells a client-side timeout
// or cancel apart from the server's own DeadlineExceeded (missing replicas).
func GRPCKind(ctx context.Context, err error) Kind {
	if err == nil {
		return KindOK
	}
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return KindTimeout
	case context.Canceled:
		return kindCanceled
	}
	s, _ := status.FromError(err)
	switch s.Code() {
	case codes.NotFound:
		return KindNotFound
	case codes.DeadlineExceeded:
		return KindUnavailable
	case codes.Unavailable:
		// grpc-go reports transport failures as Unavailable too; the node's own "fewer than
		// ack replicas" answer carries its message instead.
		msg := s.Message()
		if strings.Contains(msg, "connection") || strings.Contains(msg, "transport") || strings.Contains(msg, "dial") {
			return KindConnection
		}
		return KindUnavailable
	case codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition, codes.PermissionDenied,
		codes.Unauthenticated, codes.ResourceExhausted, codes.AlreadyExists, codes.Unimplemented:
		return KindClient
	case codes.Canceled:
		return kindCanceled
	}
	return KindOther
}
