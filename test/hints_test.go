package test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

// TestHintsSurviveCoordinatorKill is the lost-coordinator scenario with durable hints: 3 kvnode
// processes, RF=3; n3 is stopped; 2000 PUTs with ack=2 through n1, all acknowledged; n1 is
// killed with -9 and restarted, then n3 restarted. With no client read of those keys, n3
// comes to hold every one of them (counted by Admin NodeInfo, then checked in its store on
// disk after it stopped) and n1's hint queue drains to 0. With hints in memory (as they
// once were) the kill took them with it and n3 held none of the 2000.
func TestHintsSurviveCoordinatorKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, 0)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	c.kill(n3)

	const writes = 2000
	want := map[string]string{}
	ctx := context.Background()
	for i := range writes {
		key := fmt.Sprintf("hint-%04d", i)
		val := "v-" + key
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.kv(n1).Put(wctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte(val), Ack: 2})
		cancel()
		if err != nil {
			t.Fatalf("PUT %s ack=2 via n1 with n3 down: %v", key, err)
		}
		want[key] = val
	}
	info := func(p *proc) (*kvpb.NodeInfoResponse, error) {
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return c.admin(p).NodeInfo(ictx, &kvpb.NodeInfoRequest{})
	}
	queued := func(in *kvpb.NodeInfoResponse, peer string) uint64 {
		for _, q := range in.GetHints() {
			if q.GetPeer() == peer {
				return q.GetHints()
			}
		}
		return 0
	}
	// n1 acknowledged them all: a hint for each is on its disk (hints written after the
	// answer, for calls that failed late, land within moments).
	waitFor(t, 10*time.Second, "n1's hints for n3", func() error {
		in, err := info(n1)
		if err != nil {
			return err
		}
		if got := queued(in, n3.id); got < writes {
			return fmt.Errorf("n1 holds %d hints for n3, want %d (queues %v)", got, writes, in.GetHints())
		}
		return nil
	})

	c.kill(n1)
	c.restart(n1)
	c.restart(n3)
	back := time.Now()
	c.waitServing(n1) // an ack=3 probe write: both are back

	// Every node's key count, from Admin NodeInfo: no client read touches the keys.
	var counts map[string]uint64
	waitFor(t, 60*time.Second, "n3 holding every acknowledged write, n1's hints drained", func() error {
		counts = map[string]uint64{}
		for _, p := range []*proc{n1, n2, n3} {
			in, err := info(p)
			if err != nil {
				return fmt.Errorf("%s: %w", p.id, err)
			}
			counts[p.id] = in.GetKeys()
			if p == n1 && len(in.GetHints()) != 0 {
				return fmt.Errorf("n1 still holds hints %v; keys %v", in.GetHints(), counts)
			}
		}
		// Each holds the 2000 and the three probe keys written when the cluster started.
		if counts[n1.id] < writes || counts[n3.id] < counts[n1.id] {
			return fmt.Errorf("keys per node %v, want n3 to hold as many as n1 (>= %d)", counts, writes)
		}
		return nil
	})
	t.Logf("keys per node: %v, %v after n3's restart", counts, time.Since(back).Round(100*time.Millisecond))

	// The data itself: n3 stopped, its store opened on disk, every acknowledged value there.
	if err := n3.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM n3: %v", err)
	}
	if err := <-n3.done; err != nil {
		t.Fatalf("n3 exited with %v after SIGTERM", err)
	}
	c.mu.Lock()
	c.alive[n3] = false
	c.mu.Unlock()
	missing := storeLacks(t, n3.dir, want)
	if missing > 0 {
		t.Fatalf("n3's store lacks %d of the %d acknowledged writes", missing, writes)
	}
}

// storeLacks opens the store in dir (its node stopped) and returns how many of want's keys
// it does not hold at their value: the data itself, read on disk, not through any node.
func storeLacks(t *testing.T, dir string, want map[string]string) int {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.Dir = filepath.Clean(dir)
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatalf("open the store in %s: %v", dir, err)
	}
	defer st.Close()
	missing := 0
	for k, v := range want {
		rec, found, err := st.Get(ring.Token([]byte(k)), []byte(k))
		if err != nil {
			t.Fatalf("get %s from the store in %s: %v", k, dir, err)
		}
		if !found || rec.Tombstone || string(rec.Value) != v {
			missing++
		}
	}
	return missing
}
