// Package grpctest serves gRPC services on 127.0.0.1:0 for tests.
package grpctest

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Serve starts a gRPC server with the services register adds on 127.0.0.1:0 and returns a
// client connection to it, dialed with opts besides insecure transport; both stop at the
// test's end.
func Serve(tb testing.TB, register func(*grpc.Server), opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer()
	register(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	conn, err := grpc.NewClient(ln.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		tb.Fatalf("dial: %v", err)
	}
	tb.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-done
	})
	return conn
}
