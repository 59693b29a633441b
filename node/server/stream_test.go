package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

// openStreamStore opens a real badger store in a temp dir with small caches.
func openStreamStore(tb testing.TB) *store.Store {
	tb.Helper()
	cfg := store.DefaultConfig()
	cfg.Dir = tb.TempDir()
	cfg.ValueLogGCInterval = 0
	cfg.Badger = func(o badger.Options) badger.Options {
		return o.WithNumMemtables(2).WithBlockCacheSize(8 << 20).WithIndexCacheSize(4 << 20)
	}
	s, err := store.Open(cfg)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return s
}

// fillStore writes n records of size value bytes with keys "k%07d" and returns their bytes
// (key + value).
func fillStore(tb testing.TB, s *store.Store, n, size int) uint64 {
	tb.Helper()
	value := make([]byte, size)
	var total uint64
	var batch []store.Entry
	for i := range n {
		key := fmt.Appendf(nil, "k%07d", i)
		batch = append(batch, store.Entry{Token: ring.Token(key), Key: key, Record: store.Record{TS: uint64(i + 1), Value: value}})
		total += uint64(len(key) + size)
	}
	if _, err := s.ApplyBatch(batch); err != nil {
		tb.Fatalf("fill: %v", err)
	}
	return total
}

// serveReplica serves the Replica service over src on 127.0.0.1:0 and returns a client
// connection to it.
func serveReplica(tb testing.TB, src *store.Store) grpc.ClientConnInterface {
	tb.Helper()
	_, conn := serveReplicaDeps(tb, ReplicaDeps{Store: src})
	return conn
}

// serveReplicaDeps serves the Replica service on d (View defaults to no ring) on
// 127.0.0.1:0 and returns it and a client connection to it.
func serveReplicaDeps(tb testing.TB, d ReplicaDeps) (*Replica, grpc.ClientConnInterface) {
	tb.Helper()
	if d.View == nil {
		d.View = func() *ring.View { return nil }
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer()
	r := NewReplica(d)
	kvpb.RegisterReplicaServer(srv, r)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatalf("dial: %v", err)
	}
	tb.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-done
	})
	return r, conn
}

// pullQuarters pulls the four quarters of the token space from src at once through rc and
// returns the bytes (key + value) received.
func pullQuarters(t *testing.T, rc *RangeClient) uint64 {
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
	src := openStreamStore(t)
	total := fillStore(t, src, 40_000, 100)
	conn := serveReplica(t, src)
	const rate = 2 << 20
	rc := &RangeClient{
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
func pullQuartersWithin(t *testing.T, rc *RangeClient, total uint64, rate float64) {
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
	src := openStreamStore(t)
	total := fillStore(t, src, 40_000, 100)
	conn := serveReplica(t, src)
	var rate atomic.Uint64
	rate.Store(64 << 10)
	rc := &RangeClient{
		Conn: func(string) (grpc.ClientConnInterface, error) { return conn, nil },
		Rate: rate.Load,
	}
	done := make(chan uint64)
	go func() { done <- pullQuarters(t, rc) }()
	// Lift the rate once the pulls wait at the slow one.
	for deadline := time.Now().Add(10 * time.Second); ; {
		rc.lim.mu.Lock()
		booked := rc.lim.next.After(time.Now().Add(time.Second))
		rc.lim.mu.Unlock()
		if booked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("pulls never waited at 64 KiB/s")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	if got, want := ChunkChecksum(recs), d.Sum64(); got != want {
		t.Errorf("got checksum %x, want %x", got, want)
	}
}

// BenchmarkStreamRange pulls a whole store (20,000 records of 1 KiB) over loopback gRPC with
// a RangeClient and applies it to a fresh real store, as the mover does: MB/s of key+value.
// apply=batch is the mover's path (store.ApplyBatch per chunk); apply=record applies each
// record in its own transaction (store.Apply), as the mover did before.
func BenchmarkStreamRange(b *testing.B) {
	src := openStreamStore(b)
	total := fillStore(b, src, 20_000, 1024)
	conn := serveReplica(b, src)
	rc := &RangeClient{Conn: func(string) (grpc.ClientConnInterface, error) { return conn, nil }}
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
			for b.Loop() {
				b.StopTimer()
				dst := openStreamStore(b)
				b.StartTimer()
				err := rc.StreamRange(context.Background(), ring.Member{ID: "src"}, 0, 0, nil, 0, func(batch []store.Entry) error {
					return bc.apply(dst, batch)
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// StreamRange reads each chunk in a read transaction of its own, resumed after the previous
// chunk's last key, so a throttled stream does not pin one snapshot for its whole life: a
// version written while the stream waits between chunks reaches the receiver.
func TestStreamRangeRescansPerChunk(t *testing.T) {
	src := openStreamStore(t)
	const n = 4 * chunkRecords // 1 KiB values: chunks of chunkRecords, four of them
	fillStore(t, src, n, 1024)
	// The key with the highest token comes in the last chunk.
	var lastKey []byte
	var lastToken uint64
	for i := range n {
		key := fmt.Appendf(nil, "k%07d", i)
		if tk := ring.Token(key); lastKey == nil || tk > lastToken {
			lastKey, lastToken = key, tk
		}
	}
	conn := serveReplica(t, src)
	// The source throttles: 2 MiB/s, about a quarter of a second after each 512 KiB chunk.
	s, err := kvpb.NewReplicaClient(conn).StreamRange(context.Background(), &kvpb.StreamRangeRequest{Start: 0, End: 0, RateBytes: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	const newTS = 1 << 40
	var got *kvpb.Record
	chunks := 0
	for {
		chunk, err := s.Recv()
		if err != nil {
			t.Fatalf("recv chunk %d: %v", chunks, err)
		}
		if chunks == 0 {
			// Written after the first chunk left the source, before it reads the last one.
			if _, err := src.Apply(lastToken, lastKey, store.Record{TS: newTS, Value: []byte("new")}); err != nil {
				t.Fatal(err)
			}
		}
		chunks++
		for _, kr := range chunk.GetRecords() {
			if string(kr.GetKey()) == string(lastKey) {
				got = kr.GetRecord()
			}
		}
		if chunk.GetLast() {
			break
		}
	}
	if chunks < 4 {
		t.Fatalf("got %d chunks, want at least 4", chunks)
	}
	if got == nil {
		t.Fatalf("key %s not streamed", lastKey)
	}
	if got.GetTimestamp() != newTS || string(got.GetValue()) != "new" {
		t.Errorf("got version %d of %s, want %d written between chunks", got.GetTimestamp(), lastKey, uint64(newTS))
	}
}

// The adaptive pace halves when the latency rises above the target and grows back step by
// step below it, within the operator's rate.
func TestAdaptiveRate(t *testing.T) {
	var a adaptive
	now := time.Unix(1000, 0)
	const base = 3 * time.Millisecond // the target becomes 6 ms
	if got := a.rate(0, base, 0, now); got != adaptStart {
		t.Fatalf("first rate: got %d, want %d", got, adaptStart)
	}
	step := func(lat time.Duration, limit uint64) uint64 {
		now = now.Add(adaptEvery)
		return a.rate(limit, lat, 0, now)
	}
	if got, want := step(base, 0), uint64(adaptStart+adaptStep); got != want {
		t.Errorf("under the target: got %d, want %d", got, want)
	}
	if got, want := step(20*time.Millisecond, 0), uint64(adaptStart+adaptStep)/2; got != want {
		t.Errorf("above the target: got %d, want %d", got, want)
	}
	for range 10 {
		step(time.Second, 0)
	}
	if got := step(time.Second, 0); got != adaptMin {
		t.Errorf("long above the target: got %d, want the floor %d", got, adaptMin)
	}
	for range 100 {
		step(base, 0)
	}
	if got := step(base, 16<<20); got != 16<<20 {
		t.Errorf("with an operator's rate of 16 MiB/s: got %d", got)
	}
	if got, want := step(6*time.Millisecond, 16<<20), uint64(16<<20); got != want {
		t.Errorf("at the target: got %d, want %d (no decrease)", got, want)
	}
	// After a pause the pulls start again low, with a new baseline.
	now = now.Add(adaptIdle + time.Second)
	if got := a.rate(0, 50*time.Millisecond, 0, now); got != adaptStart {
		t.Errorf("after a pause: got %d, want %d", got, adaptStart)
	}
	if got := step(80*time.Millisecond, 0); got != adaptStart+adaptStep {
		t.Errorf("under the new target of 100 ms: got %d, want %d", got, adaptStart+adaptStep)
	}
}
