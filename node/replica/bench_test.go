package replica

import (
	"context"
	"strconv"
	"testing"
	"time"

	"ringkv/node/hints"
)

// BenchmarkCoordinatorPutGet: one Put and one Get at the default quorum
// (ack=2 of 3) through a coordinator on n0 of 3 in-process Local replicas on
// real badger, no network.
func BenchmarkCoordinatorPutGet(b *testing.B) {
	c := newCluster(b, 3)
	co := c.coordinator(b, "n0", Config{}, nil)
	ctx := context.Background()
	value := make([]byte, 100)
	keys := make([][]byte, 10_000)
	for i := range keys {
		keys[i] = []byte("key-" + strconv.Itoa(i))
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k := keys[i%len(keys)]
			i++
			if _, err := co.Put(ctx, k, value, 0, 0); err != nil {
				b.Fatalf("Put: %v", err)
			}
			if _, found, err := co.Get(ctx, k, 0, 0); err != nil || !found {
				b.Fatalf("Get = found %v err %v", found, err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				k := keys[i%len(keys)]
				i += 7
				if _, err := co.Put(ctx, k, value, 0, 0); err != nil {
					b.Errorf("Put: %v", err)
					return
				}
				if _, _, err := co.Get(ctx, k, 0, 0); err != nil {
					b.Errorf("Get: %v", err)
					return
				}
			}
		})
	})
}

// BenchmarkPutOneReplicaDown: ack=2 Puts through n0 while n2 is down (its breaker open, so
// every write leaves a hint before it is answered), with no hints, hints in memory, hints in
// a hints.Log on disk, and on disk with SyncWrites. The differences are what a durable hint
// costs a degraded write.
func BenchmarkPutOneReplicaDown(b *testing.B) {
	value := make([]byte, 100)
	for _, mode := range []string{"none", "memory", "disk", "disk-sync"} {
		b.Run(mode, func(b *testing.B) {
			c := newCluster(b, 3)
			cfg := Config{HintInterval: time.Hour}
			switch mode {
			case "memory":
				cfg.Hints = memHints(b, 1<<30)
			case "disk", "disk-sync":
				h, err := hints.Open(hints.Config{Dir: b.TempDir(), SyncWrites: mode == "disk-sync"})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { h.Close() })
				cfg.Hints = h
			}
			co := c.newCoordinator(b, "n0", cfg, nil)
			c.nodes["n2"].set(modeDown)
			ctx := context.Background()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if _, err := co.Put(ctx, []byte("key-"+strconv.Itoa(i)), value, 2, 3); err != nil {
					b.Fatalf("Put: %v", err)
				}
				i++
			}
		})
	}
}
