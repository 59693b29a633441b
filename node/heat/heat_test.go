package heat

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"ringkv/internal/testclock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testConfig(clk *testclock.Clock, dir string) Config {
	cfg := DefaultConfig()
	cfg.Now, cfg.Dir = clk.Now, dir
	return cfg
}

func sumReads(v View, from, to time.Time) (sum uint64, missing int) {
	for c, start := range v.Columns {
		if start.Before(from) || !start.Before(to) {
			continue
		}
		if !v.Present[c] {
			missing++
		}
		for b := range Buckets {
			sum += uint64(v.Cell(c, b).Reads)
		}
	}
	return sum, missing
}

// TestCompactionIsExact runs a node for 26 hours of a test clock, a random number of reads in
// each second, and checks that the reads summed over any tier's steps equal the read counter's
// increase over the same interval.
func TestCompactionIsExact(t *testing.T) {
	clk := testclock.New(epoch.Add(3 * time.Second)) // start mid-step
	h := New(testConfig(clk, ""))
	rng := rand.New(rand.NewPCG(7, 8))
	// counter[i] is the read counter's value at epoch + i seconds (reads are counted in
	// whole seconds here).
	const secs = 26 * 3600
	counter := make([]uint64, secs+1)
	for s := 3; s < secs; s++ {
		clk.Set(epoch.Add(time.Duration(s) * time.Second))
		n := 0
		if s/3600%5 != 2 { // one quiet hour in five
			n = rng.IntN(4)
		}
		for range n {
			h.Record(rng.Uint64(), false, 10, time.Millisecond, false)
		}
		counter[s+1] = counter[s] + uint64(n)
	}
	clk.Set(epoch.Add(secs * time.Second))
	for _, tc := range []struct {
		step     time.Duration
		from, to time.Duration // since epoch
	}{
		{10 * time.Second, 25*time.Hour + 10*time.Second, 26 * time.Hour},
		{10 * time.Second, 25*time.Hour + 10*time.Minute, 25*time.Hour + 11*time.Minute},
		{time.Minute, 2*time.Hour + time.Minute, 26 * time.Hour},
		{time.Minute, 5*time.Hour + 17*time.Minute, 7*time.Hour + 41*time.Minute},
		{10 * time.Minute, 0, 26 * time.Hour},
		{10 * time.Minute, 7 * time.Hour, 8*time.Hour + 20*time.Minute},
	} {
		v, err := h.Query(epoch.Add(tc.from), tc.step)
		if err != nil {
			t.Fatal(err)
		}
		got, missing := sumReads(v, epoch.Add(tc.from), epoch.Add(tc.to))
		want := counter[int(tc.to/time.Second)] - counter[int(tc.from/time.Second)]
		if got != want || missing != 0 {
			t.Errorf("step %v over [%v, %v): got %d reads (%d steps missing), want %d", tc.step, tc.from, tc.to, got, missing, want)
		}
	}
	// A tier's oldest steps are gone: the 10 s tier holds only the last hour.
	v, _ := h.Query(epoch, 10*time.Second)
	if len(v.Columns) != 360 || !v.Columns[0].Equal(epoch.Add(25*time.Hour+10*time.Second)) {
		t.Errorf("got %d columns from %v, want 360 from 25h00m10s", len(v.Columns), v.Columns[0].Sub(epoch))
	}
}

func TestP99AndErrors(t *testing.T) {
	clk := testclock.New(epoch)
	h := New(testConfig(clk, ""))
	tok := uint64(0x42) << 56
	for i := range 1000 {
		d := time.Millisecond
		if i%100 == 0 {
			d = 80 * time.Millisecond // 1%: the p99 sits on the slow ones' edge
		}
		if i%50 == 0 {
			d = 40 * time.Millisecond
		}
		h.Record(tok, false, 100, d, false)
	}
	h.Record(tok, true, 7, 5*time.Millisecond, true)
	clk.Advance(10 * time.Second)
	for _, step := range []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute} {
		v, err := h.Query(epoch, step)
		if err != nil {
			t.Fatal(err)
		}
		c := v.Cell(0, 0x42)
		rp, ok := P99(c.ReadP99)
		if !ok || rp < 40*time.Millisecond || rp > 45*time.Millisecond {
			t.Errorf("step %v: got read p99 %v, want 40ms to 45ms", step, rp)
		}
		if wp, ok := P99(c.WriteP99); ok {
			t.Errorf("step %v: one write: got a write p99 %v, want none (under %d samples)", step, wp, MinP99Samples)
		}
		if c.Reads != 1000 || c.Writes != 1 || c.Errors != 1 || c.Bytes != 100007 {
			t.Errorf("step %v: got %+v, want 1000 reads, 1 write, 1 error, 100007 bytes", step, c)
		}
		if _, ok := P99(v.Cell(0, 0x43).ReadP99); ok {
			t.Errorf("step %v: an idle bucket has a p99, want none", step)
		}
	}
}

func TestBins(t *testing.T) {
	for _, d := range []time.Duration{0, time.Microsecond, 7 * time.Microsecond, 8 * time.Microsecond,
		100 * time.Microsecond, 3 * time.Millisecond, time.Second, 100 * time.Second} {
		up := BinUpper(bin(d))
		if up < d || float64(up) > float64(max(d, time.Microsecond))*1.125+float64(time.Microsecond) {
			t.Errorf("latency %v: got bin edge %v, want within 12.5%% above", d, up)
		}
	}
	if b := bin(time.Hour); b != nbins-1 {
		t.Errorf("an hour: got bin %d, want the last %d", b, nbins-1)
	}
}

// TestRestartKeepsHistory saves, "restarts" five minutes later and checks that the saved steps
// are back, the five minutes down are no data, and the steps after the restart are zeros.
func TestRestartKeepsHistory(t *testing.T) {
	dir := t.TempDir()
	clk := testclock.New(epoch)
	h := New(testConfig(clk, dir))
	for range 5 {
		h.Record(1, false, 1, time.Millisecond, false)
		clk.Advance(10 * time.Second)
	}
	h.AddEvent("node-start", "n1 started")
	if _, err := h.Query(epoch, 10*time.Second); err != nil { // flush the live step
		t.Fatal(err)
	}
	if err := h.Save(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * time.Minute)
	h2, err := Open(testConfig(clk, dir))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	h2.AddEvent("node-start", "n1 started again")
	clk.Advance(30 * time.Second)
	v, err := h2.Query(epoch, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got, missing := sumReads(v, epoch, epoch.Add(50*time.Second)); got != 5 || missing != 0 {
		t.Errorf("before the restart: got %d reads, %d steps missing, want 5 and 0", got, missing)
	}
	for c, start := range v.Columns {
		down := !start.Before(epoch.Add(60*time.Second)) && start.Before(epoch.Add(5*time.Minute+50*time.Second))
		if v.Present[c] == down {
			t.Errorf("step at %v: got present %v, want %v", start.Sub(epoch), v.Present[c], !down)
		}
	}
	if len(v.Events) != 2 || v.Events[0].Text != "n1 started" || v.Events[1].Text != "n1 started again" {
		t.Errorf("got events %+v, want both starts in order", v.Events)
	}
	// A damaged file is set aside and the history starts empty.
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(testConfig(clk, dir)); err == nil {
		t.Errorf("damaged file: got no error, want one")
	}
	if _, err := os.Stat(filepath.Join(dir, FileName+".bad")); err != nil {
		t.Errorf("damaged file not set aside: %v", err)
	}
}

func TestMemoryBound(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory makes heap figures meaningless")
	}
	cfg := DefaultConfig()
	if b := cfg.MemoryBound(); b > 16<<20 {
		t.Fatalf("got a bound of %d bytes, want at most 16 MiB", b)
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	clk := testclock.New(epoch)
	cfg.Now = clk.Now
	before := heap()
	h := New(cfg)
	long := string(make([]byte, 1000))
	for i := range 3000 {
		h.AddEvent(long, long)
		if i%10 == 0 { // more owners than are named, with the longest names
			var o [Buckets]string
			for b := range o {
				o[b] = fmt.Sprintf("%s-%d", long[:MaxOwnerName-4], (i+b)%300)
			}
			h.SetOwners(o)
		}
		for b := range Buckets {
			h.Record(uint64(b)<<56, i%2 == 0, 1000, time.Duration(i)*time.Millisecond, i%3 == 0)
		}
		clk.Advance(10 * time.Minute)
	}
	used := heap() - before
	runtime.KeepAlive(h)
	if used > uint64(cfg.MemoryBound()) {
		t.Errorf("got %d bytes in use, want at most the bound %d", used, cfg.MemoryBound())
	}
	t.Logf("in use %d bytes, bound %d", used, cfg.MemoryBound())
}

// TestOwners: each step keeps the owner of each bucket as the ring stood at its end; steps
// before any owner was set, and steps not seen, have none; a restart keeps them.
func TestOwners(t *testing.T) {
	dir := t.TempDir()
	clk := testclock.New(epoch)
	h := New(testConfig(clk, dir))
	var o [Buckets]string
	for b := range o {
		o[b] = "n1"
	}
	clk.Advance(10 * time.Second) // step 1: no owner yet
	h.SetOwners(o)                // step 1 ends owned by n1
	clk.Advance(10 * time.Second)
	o[0x42] = "n4"
	h.SetOwners(o) // step 2: 0x42 moved to n4
	clk.Advance(10 * time.Second)
	if err := h.Save(); err != nil {
		t.Fatal(err)
	}
	h2, err := Open(testConfig(clk, dir))
	if err != nil {
		t.Fatal(err)
	}
	for name, hh := range map[string]*History{"live": h, "reopened": h2} {
		v, err := hh.Query(epoch, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got := []string{v.Owner(0, 0x42), v.Owner(1, 0x42), v.Owner(2, 0x42), v.Owner(2, 0x41)}
		if want := []string{"", "n1", "n4", "n1"}; !slices.Equal(got, want) {
			t.Errorf("%s: got owners of 0x42 at steps 0-2 and of 0x41 at 2 %q, want %q", name, got, want)
		}
	}
	v, _ := h2.Query(epoch, 10*time.Second)
	if last := len(v.Columns) - 1; v.Owner(last, 0x42) != "" && !v.Present[last] {
		t.Errorf("a step not seen has owner %q, want none", v.Owner(last, 0x42))
	}
}

func TestConcurrentRecordAndQuery(t *testing.T) {
	h := New(DefaultConfig())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 3000 {
				h.Record(uint64(i*g)<<48, i%2 == 0, 10, time.Millisecond, false)
				if i%500 == 0 {
					_, _ = h.Query(time.Now().Add(-time.Minute), 10*time.Second)
					h.AddEvent("test", "event")
				}
			}
		})
	}
	wg.Wait()
	v, err := h.Query(time.Now().Add(-time.Minute), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for c := range v.Columns {
		for b := range Buckets {
			n += uint64(v.Cell(c, b).Reads + v.Cell(c, b).Writes)
		}
	}
	if n > 12000 {
		t.Errorf("got %d ops, want at most 12000", n)
	}
}

func TestBadStep(t *testing.T) {
	h := New(DefaultConfig())
	if _, err := h.Query(time.Now().Add(-time.Hour), 30*time.Second); err == nil {
		t.Errorf("step 30s: got no error, want one")
	}
}

func BenchmarkRecord(b *testing.B) {
	h := New(DefaultConfig())
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for pb.Next() {
			h.Record(r.Uint64(), false, 100, time.Millisecond, false)
		}
	})
}
