package loadgen

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"ringkv/proto/kvpb"
)

// kvServer is a KV gRPC server for tests; hook (optional) runs before every answer.
type kvServer struct {
	kvpb.UnimplementedKVServer
	hook func(ctx context.Context, key string) error
}

func (s *kvServer) run(ctx context.Context, key []byte) error {
	if s.hook != nil {
		return s.hook(ctx, string(key))
	}
	return nil
}

func (s *kvServer) Get(ctx context.Context, r *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	return &kvpb.GetResponse{Value: []byte("v")}, s.run(ctx, r.Key)
}

func (s *kvServer) Put(ctx context.Context, r *kvpb.PutRequest) (*kvpb.PutResponse, error) {
	return &kvpb.PutResponse{}, s.run(ctx, r.Key)
}

func (s *kvServer) Delete(ctx context.Context, r *kvpb.DeleteRequest) (*kvpb.DeleteResponse, error) {
	return &kvpb.DeleteResponse{}, s.run(ctx, r.Key)
}

// startGRPC serves srv on 127.0.0.1:0 and returns a target with conns connections to it.
func startGRPC(t testing.TB, srv kvpb.KVServer, conns int) *GRPCTarget {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	kvpb.RegisterKVServer(gs, srv)
	var wg sync.WaitGroup
	wg.Go(func() { _ = gs.Serve(lis) })
	tgt, err := DialGRPCTarget(lis.Addr().String(), conns, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tgt.Close()
		gs.Stop()
		wg.Wait()
	})
	return tgt
}

// startHTTP serves h and returns a target with conns connections to it.
func startHTTP(t testing.TB, h http.Handler, conns int) *HTTPTarget {
	t.Helper()
	srv := httptest.NewServer(h)
	tgt := NewHTTPTarget(srv.URL, conns, 0, 0)
	t.Cleanup(func() {
		tgt.Close()
		srv.Close()
	})
	return tgt
}

// stallOnce holds every request that arrives in [at, at+d) after the first request until
// at+d: one pause of the server, like a long GC or a disk stall.
type stallOnce struct {
	at, d time.Duration
	once  sync.Once
	t0    time.Time
}

func (s *stallOnce) hook(ctx context.Context, _ string) error {
	s.once.Do(func() { s.t0 = time.Now() })
	now := time.Since(s.t0)
	if now >= s.at && now < s.at+s.d {
		select {
		case <-time.After(s.at + s.d - now):
		case <-ctx.Done():
		}
	}
	return nil
}

// capacityServer emulates a server with a fixed capacity: one queue served at rate requests
// per second. Below capacity a request waits about 1/rate; past it the queue grows without bound.
type capacityServer struct {
	service time.Duration
	mu      sync.Mutex
	next    time.Time
}

func (c *capacityServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	now := time.Now()
	if c.next.Before(now) {
		c.next = now
	}
	c.next = c.next.Add(c.service)
	done := c.next
	c.mu.Unlock()
	select {
	case <-time.After(time.Until(done)):
	case <-r.Context().Done():
	}
	w.WriteHeader(http.StatusOK)
}
