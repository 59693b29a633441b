package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"ringkv/loadgen"
)

// flakyTarget fails the writes of each key in fails[key] times, then takes them; it checks
// that no connection has two requests in flight (loadgen.Target's contract).
type flakyTarget struct {
	mu       sync.Mutex
	fails    map[string]int
	written  map[string]int
	inFlight map[int]bool
	overlap  bool
}

func (f *flakyTarget) Put(_ context.Context, conn int, key string, value []byte) loadgen.Kind {
	f.mu.Lock()
	if f.inFlight[conn] {
		f.overlap = true
	}
	f.inFlight[conn] = true
	f.mu.Unlock()
	time.Sleep(100 * time.Microsecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight[conn] = false
	if f.fails[key] > 0 {
		f.fails[key]--
		return loadgen.KindUnavailable
	}
	f.written[key] = len(value)
	return loadgen.KindOK
}

func (f *flakyTarget) Get(context.Context, int, string) loadgen.Kind    { return loadgen.KindOK }
func (f *flakyTarget) Delete(context.Context, int, string) loadgen.Kind { return loadgen.KindOK }

// TestRetryFill: the keys whose write failed are written again until they take, up to
// fillAttempts rounds; a key that fails more often is returned.
func TestRetryFill(t *testing.T) {
	var keys []string
	fails := map[string]int{}
	for i := range 40 {
		k := fmt.Sprintf("key%d", i)
		keys = append(keys, k)
		fails[k] = i % 3 // 0, 1 or 2 more failures: each within fillAttempts
	}
	fails["key39"] = fillAttempts + 1 // never within the attempts
	ft := &flakyTarget{fails: fails, written: map[string]int{}, inFlight: map[int]bool{}}
	var rounds []int
	start := time.Now()
	left := retryFill(context.Background(), ft, keys, make([]byte, 7), time.Second, 4, func(attempt int, ks []string) {
		rounds = append(rounds, len(ks))
	})
	if !slices.Equal(left, []string{"key39"}) {
		t.Errorf("left %v, want [key39]", left)
	}
	// Round 1 writes all 40; 27 have failures left (the 26 with i%3 != 0, and key39), then 14
	// (the 13 with i%3 == 2, and key39).
	if want := []int{40, 27, 14}; !slices.Equal(rounds, want) {
		t.Errorf("rounds wrote %v keys, want %v", rounds, want)
	}
	if d := time.Since(start); d < fillPause+2*fillPause {
		t.Errorf("three rounds took %s, want at least the pauses between them (%s)", d, 3*fillPause)
	}
	for _, k := range keys[:39] {
		if ft.written[k] != 7 {
			t.Errorf("%s: written with %d bytes, want 7", k, ft.written[k])
		}
	}
	if ft.overlap {
		t.Error("a connection had two writes in flight")
	}

	// A fill cut short returns every key it was given: which were written is not known.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if left := retryFill(ctx, ft, []string{"a", "b"}, nil, time.Second, 2, func(int, []string) {}); len(left) != 2 {
		t.Errorf("canceled: left %v, want both keys", left)
	}
}
