package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/internal/storetest"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRemoteWrite: replica writes from a Remote to the Replica service of NewGRPC (its
// interceptors) over real loopback gRPC on a real badger store, by the unary Write call and in
// batches on the Batch stream, from 1 and from 64 concurrent callers. cpu-ns/op is the
// process's CPU (client and server together) per write.
func BenchmarkRemoteWrite(b *testing.B) {
	st := storetest.Open(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv, _ := NewGRPC(GRPCConfig{Logger: slog.New(slog.DiscardHandler)})
	kvpb.RegisterReplicaServer(srv, NewReplica(ReplicaDeps{Local: replica.NewLocal(st, nil), View: func() *ring.View { return nil }}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	b.Cleanup(func() {
		srv.Stop()
		<-done
	})
	value := make([]byte, 100)
	keys := make([][]byte, 10_000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	for _, mode := range []string{"unary", "batch"} {
		for _, callers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/c%d", mode, callers), func(b *testing.B) {
				conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					b.Fatal(err)
				}
				var opts []replica.RemoteOption
				if mode == "unary" {
					opts = append(opts, replica.Unary())
				}
				r := replica.NewRemote(conn, nil, opts...)
				defer func() {
					r.Close()
					conn.Close()
				}()
				ctx := context.Background()
				var ts atomic.Uint64
				write := func(i int) error {
					_, err := r.Write(ctx, keys[i%len(keys)], store.Record{TS: ts.Add(1), Value: value}, ring.ViewID{})
					return err
				}
				if err := write(0); err != nil { // connect outside the timing
					b.Fatal(err)
				}
				b.ReportAllocs()
				cpu0 := cpuTime(b)
				b.ResetTimer()
				if callers == 1 {
					for i := 0; b.Loop(); i++ {
						if err := write(i); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
					var g atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						i := int(g.Add(1)) * 613
						for pb.Next() {
							if err := write(i); err != nil {
								b.Error(err)
								return
							}
							i += 7
						}
					})
				}
				b.StopTimer()
				b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
