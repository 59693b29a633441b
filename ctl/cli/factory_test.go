package cli

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"ringkv/internal/grpctest"
)

func TestSplitAddrs(t *testing.T) {
	if got, want := SplitAddrs(" a:1, ,b:2,"), []string{"a:1", "b:2"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestAddrList: --addr a,b,c is tried in turn, like etcdctl's --endpoints: with the first
// address refusing connections, calls reach the second.
func TestAddrList(t *testing.T) {
	up := grpctest.Serve(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) })
	ios, _, _, _ := Test()
	f := NewFactory(ios)
	defer f.Close()
	f.Addr = "127.0.0.1:1," + up.Target()
	conn, err := f.Conn("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("got %v, want the second address to answer", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("got %s, want SERVING", resp.GetStatus())
	}
}
