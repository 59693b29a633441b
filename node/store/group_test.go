package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestGroupCommitLastWriteWins has 48 goroutines apply random timestamps to a few hot keys
// and many cold ones, some through ApplyBatch and some through ApplyAsync (led by the
// committer), so groups hold one key several times, mix waiting and callback calls, and
// race with batches: every key must end with the greatest record written to it, and that
// record's write must have reported applied.
func TestGroupCommitLastWriteWins(t *testing.T) {
	for _, syncWrites := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", syncWrites), func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.SyncWrites = syncWrites
			var maxGroup atomic.Int64
			cfg.OnSync = func(n int) {
				for cur := maxGroup.Load(); int64(n) > cur && !maxGroup.CompareAndSwap(cur, int64(n)); cur = maxGroup.Load() {
				}
			}
			s := openTest(t, cfg)
			const goroutines, writes, hot, cold = 48, 150, 4, 200
			type won struct {
				rec     Record
				applied bool
			}
			best := make([]map[int]won, goroutines) // per goroutine: key → its greatest write
			var wg sync.WaitGroup
			for g := range goroutines {
				best[g] = map[int]won{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					for range writes {
						k := rng.IntN(hot + cold)
						if rng.IntN(2) == 0 {
							k = rng.IntN(hot)
						}
						rec := val(rng.Uint64N(1000)+1, fmt.Sprintf("g%02d", g))
						if rec.TS%11 == 0 {
							rec = tomb(rec.TS)
						}
						var applied bool
						var err error
						switch g % 8 {
						case 0: // some writers go through ApplyBatch
							var n int
							n, err = s.ApplyBatch([]Entry{{Token: uint64(k), Key: fmt.Appendf(nil, "k%d", k), Record: rec}})
							applied = n == 1
						case 1, 2: // some through ApplyAsync, led by the committer or by an Apply
							type outcome struct {
								applied bool
								err     error
							}
							ch := make(chan outcome, 1)
							s.ApplyAsync(uint64(k), fmt.Appendf(nil, "k%d", k), rec, func(a bool, e error) { ch <- outcome{a, e} })
							o := <-ch
							applied, err = o.applied, o.err
						default:
							applied, err = s.Apply(uint64(k), fmt.Appendf(nil, "k%d", k), rec)
						}
						if err != nil {
							t.Errorf("apply: %v", err)
							return
						}
						if b, ok := best[g][k]; !ok || rec.Newer(b.rec) {
							best[g][k] = won{rec, applied}
						}
					}
				}()
			}
			wg.Wait()
			want := map[int]won{}
			for _, m := range best {
				for k, w := range m {
					if b, ok := want[k]; !ok || w.rec.Newer(b.rec) {
						want[k] = w
					}
				}
			}
			for k, w := range want {
				got, found, err := s.Get(uint64(k), fmt.Appendf(nil, "k%d", k))
				if err != nil || !found {
					t.Fatalf("Get k%d: found=%v err=%v", k, found, err)
				}
				if !sameRecord(got, w.rec) {
					t.Errorf("k%d: got %+v, want the greatest write %+v", k, got, w.rec)
				}
				if !w.applied {
					t.Errorf("k%d: the greatest write %+v reported not applied", k, w.rec)
				}
			}
			if got := s.KeyCount(); got != int64(len(want)) {
				t.Errorf("KeyCount: got %d, want %d", got, len(want))
			}
			if syncWrites && maxGroup.Load() < 2 {
				t.Errorf("largest group: got %d writes, want several (no group commit happened)", maxGroup.Load())
			}
		})
	}
}

// TestSyncWritesAcknowledgeAfterSync counts, through Config.OnSync, the writes each fsync
// covered: no Apply may return before a sync covering it, so at every return the writes
// acknowledged never exceed the writes synced; and under load a sync covers many Applies.
func TestSyncWritesAcknowledgeAfterSync(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SyncWrites = true
	var synced, syncs, acked atomic.Int64
	cfg.OnSync = func(n int) {
		syncs.Add(1)
		synced.Add(int64(n))
	}
	s := openTest(t, cfg)
	const goroutines, writes = 32, 40
	var early atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range writes {
				if _, err := s.Apply(uint64(g), fmt.Appendf(nil, "g%d-%d", g, i), val(1, "v")); err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				if a := acked.Add(1); a > synced.Load() {
					early.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := early.Load(); n > 0 {
		t.Errorf("%d Applies returned before a sync covered them", n)
	}
	if got, want := synced.Load(), acked.Load(); got != want {
		t.Errorf("writes synced: got %d, want %d (every acknowledged write)", got, want)
	}
	// Wide margin: 32 writers against fsyncs of a millisecond or more share syncs heavily.
	if ratio := float64(acked.Load()) / float64(syncs.Load()); ratio <= 1.5 {
		t.Errorf("Applies per sync: got %.2f, want > 1.5 (%d acks, %d syncs)", ratio, acked.Load(), syncs.Load())
	} else {
		t.Logf("Applies per sync: %.1f (%d acks, %d syncs)", ratio, acked.Load(), syncs.Load())
	}
}

// TestApplyAsyncClose has writes in flight through ApplyAsync when the store closes: Close
// waits for their commits (each gets its outcome), and a later ApplyAsync gets ErrClosed at
// once; the committer goroutine is gone (goleak in TestMain).
func TestApplyAsyncClose(t *testing.T) {
	s, err := Open(testConfig(t.TempDir()))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	const n = 200
	var wg sync.WaitGroup
	var applied atomic.Int64
	wg.Add(n)
	for i := range n {
		s.ApplyAsync(uint64(i), fmt.Appendf(nil, "k%d", i), val(1, "v"), func(a bool, err error) {
			if err != nil {
				t.Errorf("ApplyAsync k%d: %v", i, err)
			}
			if a {
				applied.Add(1)
			}
			wg.Done()
		})
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	if got := applied.Load(); got != n {
		t.Errorf("applied %d writes, want %d", got, n)
	}
	var got error
	s.ApplyAsync(1, []byte("late"), val(2, "v"), func(_ bool, err error) { got = err })
	if !errors.Is(got, ErrClosed) {
		t.Errorf("ApplyAsync after Close: got %v, want ErrClosed", got)
	}
}
