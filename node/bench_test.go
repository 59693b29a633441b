package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/internal/eventually"
	"ringkv/node"
	"ringkv/proto/kvpb"
)

// BenchmarkClusterKV: Put and Get at the default quorum (ack=2 of from=3) through
// the KV gRPC service of n1 of an in-process 3-node cluster (badger on disk in
// b.TempDir(), every hop over real loopback gRPC: client -> n1's coordinator ->
// its local store and n2, n3's Replica service). Compare with
// node/replica's BenchmarkCoordinatorPutGet (3 Local replicas, no network).
func BenchmarkClusterKV(b *testing.B) {
	base := node.DefaultConfig()
	base.Replicas = 3
	base.DrainTimeout = 2 * time.Second
	c, err := node.StartLocalCluster(context.Background(), 3, base, b.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatalf("start cluster: %v", err)
	}
	b.Cleanup(func() {
		if err := c.Close(); err != nil {
			b.Errorf("close cluster: %v", err)
		}
	})
	conn, err := grpc.NewClient(c.Node(0).Addrs().GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	b.Cleanup(func() { conn.Close() })
	kv := kvpb.NewKVClient(conn)
	ctx := context.Background()

	// Wait until every replica acknowledges (ack=3): peers connected, ring served.
	eventually.Succeeds(b, 15*time.Second, func() error {
		if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: []byte("settle"), Value: []byte("x"), Ack: 3, From: 3}); err != nil {
			return fmt.Errorf("cluster did not settle: %w", err)
		}
		return nil
	})

	value := make([]byte, 100)
	keys := make([][]byte, 10_000)
	for i := range keys {
		keys[i] = []byte("key-" + strconv.Itoa(i))
		if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: keys[i], Value: value}); err != nil {
			b.Fatalf("fill: %v", err)
		}
	}

	b.Run("put", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: keys[i%len(keys)], Value: value}); err != nil {
				b.Fatalf("Put: %v", err)
			}
			i++
		}
	})
	// put-c64: 64 clients writing at once, the load where replica messages can share a
	// batch (the wrk -c64 row of the write-path comparison table).
	b.Run("put-c64", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(32) // × GOMAXPROCS(2) = 64 clients
		var goroutines atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(goroutines.Add(1)) * 613
			for pb.Next() {
				if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: keys[i%len(keys)], Value: value}); err != nil {
					b.Errorf("Put: %v", err)
					return
				}
				i += 7
			}
		})
	})
	b.Run("get", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := kv.Get(ctx, &kvpb.GetRequest{Key: keys[i%len(keys)]}); err != nil {
				b.Fatalf("Get: %v", err)
			}
			i++
		}
	})
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k := keys[i%len(keys)]
			i++
			if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: k, Value: value}); err != nil {
				b.Fatalf("Put: %v", err)
			}
			if _, err := kv.Get(ctx, &kvpb.GetRequest{Key: k}); err != nil {
				b.Fatalf("Get: %v", err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8)
		var goroutines atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			// Each goroutine walks the keys from its own offset, so that they do not
			// write the same key at the same moment.
			i := int(goroutines.Add(1)) * 613
			for pb.Next() {
				k := keys[i%len(keys)]
				i += 7
				if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: k, Value: value}); err != nil {
					b.Errorf("Put: %v", err)
					return
				}
				if _, err := kv.Get(ctx, &kvpb.GetRequest{Key: k}); err != nil {
					b.Errorf("Get: %v", err)
					return
				}
			}
		})
	})
}
