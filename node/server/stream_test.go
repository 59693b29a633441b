package server

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"

	"ringkv/internal/grpctest"
	"ringkv/internal/storetest"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

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
	r := NewReplica(d)
	return r, grpctest.Serve(tb, func(s *grpc.Server) { kvpb.RegisterReplicaServer(s, r) })
}

// StreamRange reads each chunk in a read transaction of its own, resumed after the previous
// chunk's last key, so a throttled stream does not pin one snapshot for its whole life: a
// version written while the stream waits between chunks reaches the receiver.
func TestStreamRangeRescansPerChunk(t *testing.T) {
	src := storetest.Open(t)
	const n = 4 * chunkRecords // 1 KiB values: chunks of chunkRecords, four of them
	storetest.Fill(t, src, n, 1024)
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
