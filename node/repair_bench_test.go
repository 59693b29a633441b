package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/internal/eventually"
	"ringkv/node"
	"ringkv/node/hlc"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

// BenchmarkRepairOnePercentMissing: an in-process 3-node cluster (N=3, 64 vnodes each, badger
// on disk) holds 100k keys of 100-byte values; n3 misses 1% of them. Each iteration deletes
// those keys from n3's store, then repairs the whole ring (Admin.StartRepair on n1, the
// default rate of 64 MiB/s, then background repair's 4 MiB/s) while a client does 400 ops/s (half ack=2 GETs, half ack=2 PUTs of other
// keys) through n1, and reports: bytes streamed over the ideal (the missing keys' key +
// value bytes), the repair's wall time and the process's CPU time during it, and the
// client's p99 over the 3 s before the repair and during it.
//
//	go test -run '^$' -bench BenchmarkRepairOnePercentMissing -benchtime 3x ./node/
func BenchmarkRepairOnePercentMissing(b *testing.B) {
	base := node.DefaultConfig()
	base.Replicas = 3
	base.RepairInterval = 0
	base.DrainTimeout = 2 * time.Second
	c, err := node.StartLocalCluster(context.Background(), 3, base, b.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	conn, err := grpc.NewClient(c.Node(0).Addrs().GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	kv, admin := kvpb.NewKVClient(conn), kvpb.NewAdminClient(conn)
	ctx := context.Background()
	eventually.Succeeds(b, 15*time.Second, func() error {
		_, err := kv.Put(ctx, &kvpb.PutRequest{Key: []byte("settle"), Value: []byte("x"), Ack: 3, From: 3})
		return err
	})

	const keys, missEvery, valueSize = 100_000, 100, 100
	ts := hlc.Since(time.Now())
	var missing []store.Entry
	var ideal uint64
	batch := make([]store.Entry, 0, 1000)
	flush := func() {
		for i := range 3 {
			in := batch
			if i == 2 {
				in = slices.DeleteFunc(slices.Clone(batch), func(e store.Entry) bool { return e.Record.TS == ts+1 })
			}
			if _, err := c.Node(i).Store().ApplyBatch(in); err != nil {
				b.Fatal(err)
			}
		}
		batch = batch[:0]
	}
	for i := range keys {
		k := fmt.Appendf(nil, "bench-%06d", i)
		e := store.Entry{Token: ring.Token(k), Key: k, Record: store.Record{TS: ts, Value: make([]byte, valueSize)}}
		if i%missEvery == 0 {
			e.Record.TS = ts + 1 // marks the keys n3 misses
			missing = append(missing, e)
			ideal += uint64(len(k) + valueSize)
		}
		batch = append(batch, e)
		if len(batch) == cap(batch) {
			flush()
		}
	}
	flush()

	for _, rate := range []uint64{0, 4 << 20} {
		name := "rate=default"
		if rate > 0 {
			name = fmt.Sprintf("rate=%dMiB", rate>>20)
		}
		b.Run(name, func(b *testing.B) { benchRepair(b, c, kv, admin, rate, missing, ideal) })
	}
}

func benchRepair(b *testing.B, c *node.LocalCluster, kv kvpb.KVClient, admin kvpb.AdminClient, rate uint64, missing []store.Entry, ideal uint64) {
	ctx := context.Background()
	var ratios, secs, cpus, before, during, trees []float64
	for b.Loop() {
		// n3 loses the 1% again (the previous iteration repaired them).
		for _, e := range missing {
			if err := c.Node(2).Store().DeleteRange(e.Token-1, e.Token); err != nil {
				b.Fatal(err)
			}
		}
		load := startClientLoad(kv, 400)
		time.Sleep(3 * time.Second) // the "before" window of the client load
		pBefore := load.cut()
		cpu0, t0 := cpuTime(), time.Now()
		plan, err := admin.StartRepair(ctx, &kvpb.RepairRequest{RateBytes: rate})
		if err != nil {
			b.Fatal(err)
		}
		var p *kvpb.RepairProgress
		eventually.Succeeds(b, 5*time.Minute, func() error {
			p, err = admin.RepairStatus(ctx, &kvpb.RepairStatusRequest{})
			if err == nil && (p.GetId() != plan.GetId() || p.GetState() == kvpb.RepairState_REPAIR_STATE_RUNNING) {
				err = fmt.Errorf("repair running")
			}
			return err
		})
		el, cpu := time.Since(t0), cpuTime()-cpu0
		pDuring := load.cut()
		load.stop()
		if p.GetState() != kvpb.RepairState_REPAIR_STATE_DONE {
			b.Fatalf("repair %s: %s", p.GetState(), p.GetError())
		}
		ratio := float64(p.GetBytesStreamed()) / float64(ideal)
		b.Logf("repair: %d ranges, %d keys compared, %d tree bytes, %d keys / %d bytes streamed for %d / %d missing (%.2fx), %s wall, %.2fs CPU; client p99 %.2fms before (%d ops), %.2fms during (%d ops)",
			p.GetRangesTotal(), p.GetKeysCompared(), p.GetTreeBytes(), p.GetKeysStreamed(), p.GetBytesStreamed(), len(missing), ideal, ratio,
			el.Round(time.Millisecond), cpu.Seconds(), pBefore.p99, pBefore.n, pDuring.p99, pDuring.n)
		ratios, secs, cpus = append(ratios, ratio), append(secs, el.Seconds()), append(cpus, cpu.Seconds())
		before, during = append(before, pBefore.p99), append(during, pDuring.p99)
		trees = append(trees, float64(p.GetTreeBytes())/float64(ideal))
		// Every node holds every key again.
		for _, e := range missing {
			if _, found, _ := c.Node(2).Store().Get(e.Token, e.Key); !found {
				b.Fatalf("n3 still misses %s", e.Key)
			}
		}
	}
	b.ReportMetric(median(ratios), "streamed/ideal")
	b.ReportMetric(median(trees), "tree/ideal")
	b.ReportMetric(median(secs), "repair-s")
	b.ReportMetric(median(cpus), "cpu-s")
	b.ReportMetric(median(before), "p99-before-ms")
	b.ReportMetric(median(during), "p99-during-ms")
	b.ReportMetric(0, "ns/op")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clientLoad is a paced client: rate ops/s, GETs of the bench keys and PUTs of keys of its
// own alternating, each timed.
type clientLoad struct {
	mu   sync.Mutex
	lat  []time.Duration
	done chan struct{}
	wg   sync.WaitGroup
}

type window struct {
	p99 float64 // ms
	n   int
}

func startClientLoad(kv kvpb.KVClient, rate int) *clientLoad {
	l := &clientLoad{done: make(chan struct{})}
	const workers = 4
	for w := range workers {
		l.wg.Go(func() {
			t := time.NewTicker(time.Second * workers / time.Duration(rate))
			defer t.Stop()
			for i := 0; ; i++ {
				select {
				case <-l.done:
					return
				case <-t.C:
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if i%2 == 0 {
					kv.Get(ctx, &kvpb.GetRequest{Key: fmt.Appendf(nil, "bench-%06d", (i*7919+w)%100_000)})
				} else {
					kv.Put(ctx, &kvpb.PutRequest{Key: fmt.Appendf(nil, "load-%d-%d", w, i), Value: make([]byte, 100)})
				}
				cancel()
				l.mu.Lock()
				l.lat = append(l.lat, time.Since(start))
				l.mu.Unlock()
			}
		})
	}
	return l
}

// cut returns the p99 of the latencies since the last cut.
func (l *clientLoad) cut() window {
	l.mu.Lock()
	lat := l.lat
	l.lat = nil
	l.mu.Unlock()
	if len(lat) == 0 {
		return window{}
	}
	slices.Sort(lat)
	return window{p99: float64(lat[len(lat)*99/100]) / 1e6, n: len(lat)}
}

func (l *clientLoad) stop() {
	close(l.done)
	l.wg.Wait()
}
