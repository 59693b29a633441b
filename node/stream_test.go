package node_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/node/stream"
	"ringkv/proto/kvpb"
)

// TestStreamRange streams the whole token space of one node in chunks and resumes from
// the middle.
func TestStreamRange(t *testing.T) {
	c := startCluster(t, 1, nil)
	const keys = 1500 // several chunks
	for i := range keys {
		expect(t, do(t, c, 0, "PUT", fmt.Sprintf("/v0/entity?id=s%d", i), []byte("v")), 201, "")
	}
	conn, err := grpc.NewClient(c.Node(0).Addrs().GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	rc := kvpb.NewReplicaClient(conn)

	stream := func(resume []byte) (records []*kvpb.KeyRecord, chunks int) {
		t.Helper()
		s, err := rc.StreamRange(context.Background(), &kvpb.StreamRangeRequest{Start: 0, End: 0, ResumeAfter: resume})
		if err != nil {
			t.Fatalf("stream range: %v", err)
		}
		for {
			ch, err := s.Recv()
			if err == io.EOF {
				return records, chunks
			}
			if err != nil {
				t.Fatalf("recv: %v", err)
			}
			chunks++
			if got := stream.ChunkChecksum(ch.GetRecords()); got != ch.GetChecksum() {
				t.Fatalf("chunk %d: got checksum %x, want %x", chunks, got, ch.GetChecksum())
			}
			records = append(records, ch.GetRecords()...)
			if ch.GetLast() {
				if _, err := s.Recv(); err != io.EOF {
					t.Fatalf("after the last chunk: got %v, want EOF", err)
				}
				return records, chunks
			}
		}
	}
	all, chunks := stream(nil)
	if len(all) != keys || chunks < 2 {
		t.Fatalf("got %d records in %d chunks, want %d in several", len(all), chunks, keys)
	}
	// Resume after the 1000th record.
	sk := storeKeyOf(all[999].GetKey())
	rest, _ := stream(sk)
	if len(rest) != keys-1000 {
		t.Errorf("resumed: got %d records, want %d", len(rest), keys-1000)
	}
}
