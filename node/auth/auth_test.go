package auth_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"ringkv/internal/grpctest"
	"ringkv/node/auth"
)

// recorder is a health service that records the secret each call carried.
type recorder struct {
	healthpb.UnimplementedHealthServer
	got chan []string
}

func (r recorder) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.got <- md.Get(auth.Header)
	return &healthpb.HealthCheckResponse{}, nil
}

// A connection dialed with the Secret credentials carries the secret on every call, under
// the Header the server reads.
func TestSecretOnEveryCall(t *testing.T) {
	rec := recorder{got: make(chan []string, 1)}
	conn := grpctest.Serve(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, rec) }, grpc.WithPerRPCCredentials(auth.Secret("s3cret")))
	for i := range 2 {
		if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v", i, status.Convert(err).Message())
		}
		if got := <-rec.got; len(got) != 1 || got[0] != "s3cret" {
			t.Errorf("call %d: got secret %q, want [s3cret]", i, got)
		}
	}
}
