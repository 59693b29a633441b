package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/internal/eventually"
	"ringkv/node"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

// Concurrent writes of one key through all three coordinators of a 3-node cluster, whose
// replica messages travel in batches on one stream per pair of nodes, leave every replica
// with the write of the highest timestamp: at ack=3 as soon as the writes are acknowledged,
// at the default quorum once the calls still running after the answers have landed.
func TestBatchConcurrentWritesOneKey(t *testing.T) {
	base := node.DefaultConfig()
	base.Replicas = 3
	base.DrainTimeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := node.StartLocalCluster(ctx, 3, base, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	kvs := make([]kvpb.KVClient, c.Len())
	for i := range kvs {
		conn, err := grpc.NewClient(c.Node(i).Addrs().GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		t.Cleanup(func() { conn.Close() })
		kvs[i] = kvpb.NewKVClient(conn)
	}
	eventually.Succeeds(t, 15*time.Second, func() error {
		_, err := kvs[0].Put(ctx, &kvpb.PutRequest{Key: []byte("settle"), Value: []byte("x"), Ack: 3, From: 3})
		return err
	})

	for _, tc := range []struct {
		name string
		ack  uint32
	}{{"all", 3}, {"quorum", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			key := []byte("contended-" + tc.name)
			const writers, each = 8, 40 // per coordinator
			type acked struct {
				ts    uint64
				value string
			}
			var mu sync.Mutex
			var got []acked
			var wg sync.WaitGroup
			for i := range kvs {
				for w := range writers {
					wg.Go(func() {
						for j := range each {
							v := fmt.Sprintf("n%d-w%d-%d", i, w, j)
							resp, err := kvs[i].Put(ctx, &kvpb.PutRequest{Key: key, Value: []byte(v), Ack: tc.ack, From: 3})
							if err != nil {
								t.Errorf("put %s via n%d: %v", v, i+1, err)
								return
							}
							mu.Lock()
							got = append(got, acked{resp.GetTimestamp(), v})
							mu.Unlock()
						}
					})
				}
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			// The newest by the store's rule: the highest timestamp, ties (two coordinators
			// can stamp the same one) broken by value.
			var top store.Record
			for _, a := range got {
				if r := (store.Record{TS: a.ts, Value: []byte(a.value)}); r.Newer(top) {
					top = r
				}
			}
			check := func() error {
				for i := range c.Len() {
					rec, found, err := c.Node(i).Store().Get(ring.Token(key), key)
					if err != nil {
						return fmt.Errorf("n%d store: %w", i+1, err)
					}
					if !found || rec.TS != top.TS || string(rec.Value) != string(top.Value) {
						return fmt.Errorf("n%d holds ts %d (found %v), want the newest acknowledged %d", i+1, rec.TS, found, top.TS)
					}
				}
				return nil
			}
			if tc.ack == 3 {
				if err := check(); err != nil {
					t.Fatal(err) // every write was on all three before it was acknowledged
				}
				return
			}
			eventually.Succeeds(t, 15*time.Second, check)
		})
	}
}
