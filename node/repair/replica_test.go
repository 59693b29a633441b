package repair

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"ringkv/node/store"
	"ringkv/node/stream"
)

// TestTreeWalkBacksOffByLatency: with Latency set, a tree walk's pace stays at the session's
// rate while the node's latency holds under the target, and falls below it while the latency
// is above.
func TestTreeWalkBacksOffByLatency(t *testing.T) {
	const rate = 4 << 20
	s := openStore(t)
	value := strings.Repeat("v", 1<<10)
	for i := range 2000 { // 2000 KiB: about 500 ms at 4 MiB/s, several of the pace's steps
		put(t, s, uint64(i+1)<<40, fmt.Sprintf("k%d", i), store.Record{TS: 100, Value: []byte(value)})
	}
	for _, c := range []struct {
		name    string
		latency time.Duration
		slower  bool
	}{
		{"latency under the target", time.Millisecond, false},
		{"latency above the target", 50 * time.Millisecond, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := NewReplica(ReplicaConfig{
				Store: s, LatencyTarget: 10 * time.Millisecond,
				Latency: func() time.Duration { return c.latency },
			})
			tr, err := r.Tree(context.Background(), 0, ^uint64(0), 8, rate)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Keys != 2000 {
				t.Fatalf("walked %d keys, want 2000", tr.Keys)
			}
			got := r.ad.Current()
			if c.slower && (got >= rate || got < stream.AdaptMin) {
				t.Errorf("pace after the walk %d B/s, want below the rate %d and at least %d", got, rate, stream.AdaptMin)
			}
			if !c.slower && got != rate {
				t.Errorf("pace after the walk %d B/s, want the rate %d", got, rate)
			}
		})
	}
}
