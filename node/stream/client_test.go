package stream_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/grpc"

	"ringkv/internal/eventually"
	"ringkv/internal/grpctest"
	"ringkv/internal/storetest"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/server"
	"ringkv/node/store"
	"ringkv/node/stream"
	"ringkv/proto/kvpb"
)

// serveReplica serves node/server's Replica service on d (View defaults to no ring) on
// 127.0.0.1:0 and returns a client connection to it.
func serveReplica(tb testing.TB, d server.ReplicaDeps) grpc.ClientConnInterface {
	tb.Helper()
	if d.View == nil {
		d.View = func() *ring.View { return nil }
	}
	return grpctest.Serve(tb, func(s *grpc.Server) { kvpb.RegisterReplicaServer(s, server.NewReplica(d)) })
}

// pullQuarters pulls the four quarters of the token space from src at once through rc and
// returns the bytes (key + value) received.
func pullQuarters(t *testing.T, rc *stream.RangeClient) uint64 {
	t.Helper()
	const q = uint64(1) << 62
	var mu sync.Mutex
	var got uint64
	var wg sync.WaitGroup
	for i := range uint64(4) {
		wg.Go(func() {
			err := rc.StreamRange(context.Background(), ring.Member{ID: "src"}, i*q, (i+1)*q, nil, 0, func(batch []store.Entry) error {
				var n uint64
				for _, e := range batch {
					n += uint64(len(e.Key) + len(e.Record.Value))
				}
				mu.Lock()
				got += n
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Errorf("stream quarter %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	return got
}

// The rate is one budget for all of a RangeClient's concurrent pulls: four ranges pulled at
// once arrive at about the rate in total, not four times it.
func TestRangeClientRateIsPerReceiver(t *testing.T) {
	src := storetest.Open(t)
	total := storetest.Fill(t, src, 40_000, 100)
	conn := serveReplica(t, server.ReplicaDeps{Store: src})
	const rate = 2 << 20
	rc := &stream.RangeClient{
		Conn: func(string) (grpc.ClientConnInterface, error) { return conn, nil },
		Rate: func() uint64 { return rate },
	}
	// Per-range throttling would reach 4× the rate; the last chunk of each range is not
	// waited for.
	pullQuartersWithin(t, rc, total, rate)
}

// pullQuartersWithin pulls the four quarters of the token space at once and checks that all
// total bytes arrive, together at no more than 1.5 × rate bytes per second (a wide margin for a
// loaded machine: only too fast fails).
func pullQuartersWithin(t *testing.T, rc *stream.RangeClient, total uint64, rate float64) {
	t.Helper()
	start := time.Now()
	got := pullQuarters(t, rc)
	took := time.Since(start)
	if got != total {
		t.Fatalf("got %d bytes, want %d", got, total)
	}
	if observed := float64(got) / took.Seconds(); observed > 1.5*rate {
		t.Errorf("got %.2f MiB/s over %s for 4 concurrent pulls, want at most 1.5 × %.2f MiB/s",
			observed/(1<<20), took.Round(time.Millisecond), rate/(1<<20))
	}
}

// A rate changed while pulls wait takes effect at once: from a rate that would take a minute
// to unthrottled.
func TestRangeClientRateChangesLive(t *testing.T) {
	src := storetest.Open(t)
	total := storetest.Fill(t, src, 40_000, 100)
	conn := serveReplica(t, server.ReplicaDeps{Store: src})
	var rate atomic.Uint64
	rate.Store(64 << 10)
	rc := &stream.RangeClient{
		Conn: func(string) (grpc.ClientConnInterface, error) { return conn, nil },
		Rate: rate.Load,
	}
	done := make(chan uint64)
	go func() { done <- pullQuarters(t, rc) }()
	// Lift the rate once the pulls wait at the slow one.
	eventually.Succeeds(t, 10*time.Second, func() error {
		if booked := stream.Booked(rc); !booked.After(time.Now().Add(time.Second)) {
			return fmt.Errorf("pulls booked until %s, want over a second ahead at 64 KiB/s", booked.Format(time.StampMilli))
		}
		return nil
	})
	rate.Store(0)
	select {
	case got := <-done:
		if got != total {
			t.Errorf("got %d bytes, want %d", got, total)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("pulls still throttled 20s after the rate was lifted (%d bytes at 64 KiB/s take a minute)", total)
	}
}

// ChunkChecksum hashes each record's MarshalBinary encoding, written without allocating.
func TestChunkChecksumMatchesRecordEncoding(t *testing.T) {
	recs := []*kvpb.KeyRecord{
		{Key: []byte("a"), Record: &kvpb.Record{Timestamp: 7, Value: []byte("value")}},
		{Key: []byte("bb"), Record: &kvpb.Record{Timestamp: 9, Tombstone: true}},
		{Key: []byte("c"), Record: &kvpb.Record{Timestamp: 1}},
	}
	d := xxhash.New()
	for _, kr := range recs {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(kr.GetKey())))
		d.Write(n[:])
		d.Write(kr.GetKey())
		b, err := replica.RecordFromProto(kr.GetRecord()).MarshalBinary()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		d.Write(b)
	}
	if got, want := stream.ChunkChecksum(recs), d.Sum64(); got != want {
		t.Errorf("got checksum %x, want %x", got, want)
	}
}

// BenchmarkStreamRange pulls a whole store (20,000 records of 1 KiB) over loopback gRPC with
// a RangeClient and applies it to a fresh real store, as the mover does: MB/s of key+value.
// apply=batch is the mover's path (store.ApplyBatch per chunk); apply=record applies each
// record in its own transaction (store.Apply), as the mover did before.
func BenchmarkStreamRange(b *testing.B) {
	src := storetest.Open(b)
	total := storetest.Fill(b, src, 20_000, 1024)
	conn := serveReplica(b, server.ReplicaDeps{Store: src})
	rc := &stream.RangeClient{Conn: func(string) (grpc.ClientConnInterface, error) { return conn, nil }}
	for _, bc := range []struct {
		name  string
		apply func(dst *store.Store, batch []store.Entry) error
	}{
		{"apply=batch", func(dst *store.Store, batch []store.Entry) error {
			_, err := dst.ApplyBatch(batch)
			return err
		}},
		{"apply=record", func(dst *store.Store, batch []store.Entry) error {
			for _, e := range batch {
				if _, err := dst.Apply(e.Token, e.Key, e.Record); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(total))
			b.ReportAllocs()
			var cpu time.Duration // both ends' CPU (one process), streams only
			var faults int64
			for b.Loop() {
				b.StopTimer()
				dst := storetest.Open(b)
				b.StartTimer()
				before, f0 := processCPU(), minorFaults()
				err := rc.StreamRange(context.Background(), ring.Member{ID: "src"}, 0, 0, nil, 0, func(batch []store.Entry) error {
					return bc.apply(dst, batch)
				})
				cpu += processCPU() - before
				faults += minorFaults() - f0
				if err != nil {
					b.Fatal(err)
				}
				// A receiver's badger lives on: its freed memtables' memory is reused, not
				// taken fresh from the OS (whose first touch costs more than the copy here).
				b.StopTimer()
				if err := dst.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			mb := float64(b.N) * float64(total) / 1e6
			b.ReportMetric(float64(cpu.Milliseconds())/mb, "cpu-ms/MB")
			b.ReportMetric(float64(faults)/mb, "faults/MB")
		})
	}
}

// processCPU is the user and system CPU this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// minorFaults is the number of page faults this process has taken without I/O.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
}

// The source's pace is one budget for all of its streams, and never above the change's rate
// (ReplicaDeps.Rate) even while its latency stays under the target.
func TestStreamRangeSourcePaceIsPerSourceWithinRate(t *testing.T) {
	src := storetest.Open(t)
	total := storetest.Fill(t, src, 12_000, 1024)
	const rate = 4 << 20
	conn := serveReplica(t, server.ReplicaDeps{
		Store:         src,
		Latency:       func() time.Duration { return time.Millisecond },
		LatencyTarget: time.Second,
		Rate:          func() uint64 { return rate },
	})
	// The receiver does not throttle: the source alone paces.
	rc := &stream.RangeClient{Conn: func(string) (grpc.ClientConnInterface, error) { return conn, nil }}
	// Each stream's first chunk goes unbooked (4 of ~24); per-stream pacing would reach 4×.
	pullQuartersWithin(t, rc, total, rate)
}
