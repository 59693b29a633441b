package hotkeys

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"ringkv/internal/testclock"
	"ringkv/node/ring"
)

var epoch = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type truth struct {
	counts map[string]uint64
}

func (tr *truth) top(k int) []string {
	keys := make([]string, 0, len(tr.counts))
	for key := range tr.counts {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if tr.counts[a] != tr.counts[b] {
			if tr.counts[a] > tr.counts[b] {
				return -1
			}
			return 1
		}
		return 0
	})
	return keys[:k]
}

// feed records n operations drawn by next, spread evenly over slices slices of clk, and
// returns their true counts.
func feed(s *Summary, clk *testclock.Clock, slicesN, n int, next func() string) *truth {
	tr := &truth{counts: map[string]uint64{}}
	per := n / slicesN
	for i := range n {
		if i > 0 && i%per == 0 {
			clk.Advance(s.cfg.Slice)
		}
		k := next()
		tr.counts[k]++
		s.Record(ring.Token([]byte(k)), ring.Token([]byte(k))>>62, []byte(k), i%4 == 0, 100)
	}
	clk.Advance(s.cfg.Slice) // close the last slice
	return tr
}

func checkTop(t *testing.T, rep Report, tr *truth) {
	t.Helper()
	want := tr.top(10)
	listed := map[string]bool{}
	for _, k := range rep.Keys {
		key := string(k.Key)
		listed[key] = true
		got := tr.counts[key]
		if got > k.Count || got < k.Count-k.Error {
			t.Errorf("key %q: true count %d outside reported %d ± %d", key, got, k.Count, k.Error)
		}
	}
	found := 0
	for _, k := range want {
		if listed[k] {
			found++
		}
	}
	if found < 9 {
		t.Errorf("got %d of the true top 10 listed, want at least 9", found)
	}
}

func TestZipfTopTen(t *testing.T) {
	clk := testclock.New(epoch)
	cfg := DefaultConfig()
	cfg.Now = clk.Now
	s := New(cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(rng, 1.1, 1, 1_000_000-1)
	n := 600_000
	if testing.Short() || raceEnabled {
		n = 60_000
	}
	tr := feed(s, clk, 6, n, func() string { return fmt.Sprintf("user:%d", z.Uint64()) })
	rep, err := s.Top(time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops != uint64(n) || rep.Slices != 6 {
		t.Errorf("got %d ops over %d slices, want %d over 6", rep.Ops, rep.Slices, n)
	}
	checkTop(t, rep, tr)
	var vsum uint64
	for _, n := range rep.Vnodes {
		vsum += n
	}
	if len(rep.Vnodes) != 4 || vsum != uint64(n) {
		t.Errorf("got %d ops over %d vnodes, want %d over 4", vsum, len(rep.Vnodes), n)
	}
	// One slice alone holds the same guarantees.
	clk.Advance(-s.cfg.Slice)
	rep, err = s.Top(10*time.Second, 10)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops != uint64(n/6) {
		t.Errorf("got %d ops in the last slice, want %d", rep.Ops, n/6)
	}
}

func TestOneHotKeyOverNoise(t *testing.T) {
	clk := testclock.New(epoch)
	cfg := DefaultConfig()
	cfg.Now = clk.Now
	s := New(cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	n := 300_000
	if testing.Short() || raceEnabled {
		n = 30_000
	}
	tr := feed(s, clk, 6, n, func() string {
		if rng.IntN(10) < 3 {
			return "the-hot-one"
		}
		return fmt.Sprintf("noise:%d", rng.IntN(1_000_000))
	})
	rep, err := s.Top(time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Keys) == 0 || string(rep.Keys[0].Key) != "the-hot-one" {
		t.Fatalf("got first %v, want the-hot-one", rep.Keys)
	}
	hot := rep.Keys[0]
	if got := tr.counts["the-hot-one"]; got > hot.Count || got < hot.Count-hot.Error {
		t.Errorf("hot key: true %d outside %d ± %d", got, hot.Count, hot.Error)
	}
	if share := float64(hot.Count) / float64(rep.Ops); share < 0.29 || share > 0.32 {
		t.Errorf("got hot share %.3f, want about 0.30", share)
	}
	if hot.Reads+hot.Writes > hot.Count || hot.Reads+hot.Writes+hot.Error < tr.counts["the-hot-one"] {
		t.Errorf("reads %d + writes %d not within the count %d ± %d", hot.Reads, hot.Writes, hot.Count, hot.Error)
	}
}

// TestMemoryBound checks that the summary's heap stays under MemoryBound and under 1 MiB
// however many distinct keys it sees, on a ring of 256 vnodes.
func TestMemoryBound(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory makes heap figures meaningless")
	}
	cfg := DefaultConfig()
	if b := cfg.MemoryBound(256); b > 1<<20 {
		t.Fatalf("got a bound of %d bytes, want at most 1 MiB", b)
	}
	clk := testclock.New(epoch)
	cfg.Now = clk.Now
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	s := New(cfg)
	key := make([]byte, 1024) // the longest key a client may send
	for i := range 200_000 {
		if i%20_000 == 0 {
			clk.Advance(cfg.Slice)
		}
		copy(key, fmt.Sprintf("k%d", i))
		s.Record(uint64(i)*0x9e3779b97f4a7c15, uint64(i%256)<<56, key, false, 1)
	}
	used := heap() - before
	runtime.KeepAlive(s)
	if used > uint64(cfg.MemoryBound(256)) {
		t.Errorf("got %d bytes in use, want at most the bound %d", used, cfg.MemoryBound(256))
	}
	t.Logf("in use %d bytes, bound %d", used, cfg.MemoryBound(256))
}

func TestWindows(t *testing.T) {
	clk := testclock.New(epoch)
	cfg := DefaultConfig()
	cfg.Now = clk.Now
	s := New(cfg)
	for _, w := range []time.Duration{0, 5 * time.Second, 70 * time.Second} {
		if _, err := s.Top(w, 10); err == nil {
			t.Errorf("window %v: got no error, want one", w)
		}
	}
	rep, err := s.Top(10*time.Second, 10)
	if err != nil || rep.Slices != 0 || len(rep.Keys) != 0 {
		t.Errorf("empty summary: got %+v, %v, want no slices", rep, err)
	}
	s.Record(1, 7, []byte("a"), true, 5)
	rep, _ = s.Top(10*time.Second, 10)
	if rep.Slices != 0 {
		t.Errorf("slice in progress: got %d slices, want 0", rep.Slices)
	}
	clk.Advance(10 * time.Second)
	rep, _ = s.Top(10*time.Second, 10)
	if rep.Slices != 1 || len(rep.Keys) != 1 || rep.Keys[0].Writes != 1 || rep.Keys[0].Bytes != 5 || rep.Vnodes[7] != 1 || len(rep.Vnodes) != 1 {
		t.Errorf("got %+v, want one write of 5 bytes", rep)
	}
	// After a minute the slice is gone.
	clk.Advance(time.Minute)
	rep, _ = s.Top(time.Minute, 10)
	if rep.Slices != 0 {
		t.Errorf("after a minute: got %d slices, want 0", rep.Slices)
	}
}

func TestLongKeysKeepAPrefix(t *testing.T) {
	clk := testclock.New(epoch)
	cfg := DefaultConfig()
	cfg.Now = clk.Now
	s := New(cfg)
	long := make([]byte, 300)
	for i := range long {
		long[i] = byte(i)
	}
	s.Record(ring.Token(long), 0, long, false, 0)
	clk.Advance(cfg.Slice)
	rep, _ := s.Top(cfg.Slice, 1)
	if len(rep.Keys) != 1 || rep.Keys[0].Len != 300 || len(rep.Keys[0].Key) != MaxKeyBytes {
		t.Fatalf("got %+v, want a %d-byte prefix of a 300-byte key", rep.Keys, MaxKeyBytes)
	}
}

func TestConcurrentRecord(t *testing.T) {
	s := New(DefaultConfig())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 5000 {
				k := fmt.Appendf(nil, "k%d", (i*7+g)%300)
				s.Record(ring.Token(k), uint64(i%5), k, i%2 == 0, 10)
				if i%1000 == 0 {
					_, _ = s.Top(10*time.Second, 5)
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkRecord(b *testing.B) {
	s := New(DefaultConfig())
	keys := make([][]byte, 1<<16)
	toks := make([]uint64, len(keys))
	z := rand.NewZipf(rand.New(rand.NewPCG(5, 6)), 1.1, 1, 1_000_000-1)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user:%d", z.Uint64())
		toks[i] = ring.Token(keys[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(keys))
		for pb.Next() {
			i = (i + 1) & (len(keys) - 1)
			s.Record(toks[i], toks[i]>>56, keys[i], i&3 == 0, 100)
		}
	})
}

// TestLive: the live window holds the slice in progress up to now, and the slice before it
// while the one in progress is younger than half a slice; a skew shows in it at once and is
// gone from it a slice and a half after it ends.
func TestLive(t *testing.T) {
	clk := testclock.New(epoch.Add(2 * time.Second))
	cfg := DefaultConfig()
	cfg.Now = clk.Now
	s := New(cfg)
	rec := func(key string, n int) {
		for range n {
			s.Record(ring.Token([]byte(key)), 1, []byte(key), false, 1)
		}
	}
	rec("old", 5)
	clk.Set(epoch.Add(12 * time.Second)) // 2 s into the next slice: the one before counts
	rec("hot", 7)
	rep := s.Live(1)
	if !rep.Start.Equal(epoch) || !rep.End.Equal(clk.Now()) || rep.Ops != 12 || string(rep.Keys[0].Key) != "hot" {
		t.Errorf("young slice: got %v to %v, %d ops, keys %v; want from the slice before, 12 ops, hot first", rep.Start.Sub(epoch), rep.End.Sub(epoch), rep.Ops, rep.Keys)
	}
	clk.Set(epoch.Add(16 * time.Second)) // past half a slice: the slice in progress alone
	rep = s.Live(0)
	if !rep.Start.Equal(epoch.Add(10*time.Second)) || rep.Ops != 7 || len(rep.Keys) != 1 {
		t.Errorf("older slice: got from %v, %d ops, %d keys; want from 10s, 7 ops, one key", rep.Start.Sub(epoch), rep.Ops, len(rep.Keys))
	}
	clk.Set(epoch.Add(26 * time.Second)) // the skew ended at 16s: gone by 26s
	rep = s.Live(0)
	if rep.Ops != 0 || len(rep.Keys) != 0 {
		t.Errorf("after the skew: got %d ops, keys %v, want none", rep.Ops, rep.Keys)
	}
}
