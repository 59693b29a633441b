package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testConfig is a small-footprint on-disk config in dir.
func testConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.Dir = dir
	cfg.Badger = func(o badger.Options) badger.Options {
		return o.WithMemTableSize(8 << 20).WithNumMemtables(2).WithBlockCacheSize(1 << 20)
	}
	return cfg
}

func openTest(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func newStore(t testing.TB) *Store {
	t.Helper()
	return openTest(t, testConfig(t.TempDir()))
}

func val(ts uint64, v string) Record { return Record{TS: ts, Value: []byte(v)} }
func tomb(ts uint64) Record          { return Record{TS: ts, Tombstone: true} }

func sameRecord(a, b Record) bool {
	return a.TS == b.TS && a.Tombstone == b.Tombstone && bytes.Equal(a.Value, b.Value)
}

func mustApply(t testing.TB, s *Store, token uint64, key string, rec Record) bool {
	t.Helper()
	ok, err := s.Apply(token, []byte(key), rec)
	if err != nil {
		t.Fatalf("Apply(%d, %q): %v", token, key, err)
	}
	return ok
}

// Last-write-wins holds for records in the tree and for records in the value log read
// without the stamp cache (Store.newer then decodes the stored record from the log).
func TestApplyLastWriteWins(t *testing.T) {
	t.Run("in the tree", func(t *testing.T) { testLastWriteWins(t, newStore(t), func(r Record) Record { return r }) })
	t.Run("in the value log", func(t *testing.T) {
		cfg := testConfig(t.TempDir())
		cfg.StampBytes, cfg.ValueThreshold = 0, 1<<10
		s := openTest(t, cfg)
		testLastWriteWins(t, s, bigRecord)
		if _, vlog := s.Size(); vlog < 32<<10 {
			t.Fatalf("value log after the writes of 4 KiB values: %d bytes, want them there", vlog)
		}
	})
}

// bigRecord is r with its value repeated to 4 KiB per byte (order between values kept).
func bigRecord(r Record) Record {
	if len(r.Value) > 0 {
		r.Value = bytes.Repeat(r.Value, 4096)
	}
	return r
}

func testLastWriteWins(t *testing.T, s *Store, sized func(Record) Record) {
	tests := []struct {
		name        string
		existing    []Record // applied first, in order
		in          Record
		wantApplied bool
		want        Record
	}{
		{"absent key", nil, val(5, "a"), true, val(5, "a")},
		{"newer put", []Record{val(5, "a")}, val(6, "b"), true, val(6, "b")},
		{"older put never overwrites", []Record{val(5, "a")}, val(4, "zzz"), false, val(5, "a")},
		{"older tombstone never overwrites", []Record{val(5, "a")}, tomb(4), false, val(5, "a")},
		{"newer tombstone deletes", []Record{val(5, "a")}, tomb(6), true, tomb(6)},
		{"newer put resurrects", []Record{tomb(5)}, val(6, "b"), true, val(6, "b")},
		{"older put after delete", []Record{tomb(5)}, val(4, "b"), false, tomb(5)},
		{"tombstone beats put at equal ts", []Record{val(5, "a")}, tomb(5), true, tomb(5)},
		{"put loses to tombstone at equal ts", []Record{tomb(5)}, val(5, "a"), false, tomb(5)},
		{"greater bytes win at equal ts", []Record{val(5, "a")}, val(5, "b"), true, val(5, "b")},
		{"smaller bytes lose at equal ts", []Record{val(5, "b")}, val(5, "a"), false, val(5, "b")},
		{"duplicate is not applied", []Record{val(5, "a")}, val(5, "a"), false, val(5, "a")},
		{"empty value is a value", nil, val(5, ""), true, val(5, "")},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token, key := uint64(i*1000), []byte(tt.name)
			for _, r := range tt.existing {
				mustApply(t, s, token, tt.name, sized(r))
			}
			applied, err := s.Apply(token, key, sized(tt.in))
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if applied != tt.wantApplied {
				t.Errorf("applied: got %v, want %v", applied, tt.wantApplied)
			}
			got, found, err := s.Get(token, key)
			if err != nil || !found {
				t.Fatalf("Get: got found=%v err=%v, want found", found, err)
			}
			if want := sized(tt.want); !sameRecord(got, want) {
				t.Fatalf("Get: got TS %d tombstone %v %d value bytes, want TS %d tombstone %v %d bytes",
					got.TS, got.Tombstone, len(got.Value), want.TS, want.Tombstone, len(want.Value))
			}
		})
	}
}

func TestGetAbsent(t *testing.T) {
	s := newStore(t)
	mustApply(t, s, 1, "a", val(1, "x"))
	tests := []struct {
		token uint64
		key   string
	}{{1, "b"}, {2, "a"}, {0, ""}}
	for _, tt := range tests {
		_, found, err := s.Get(tt.token, []byte(tt.key))
		if err != nil || found {
			t.Errorf("Get(%d, %q): got found=%v err=%v, want not found", tt.token, tt.key, found, err)
		}
	}
}

func TestApplyRejectsInvalidRecord(t *testing.T) {
	s := newStore(t)
	_, err := s.Apply(1, []byte("k"), Record{TS: 1, Tombstone: true, Value: []byte("x")})
	if !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("got %v, want %v", err, ErrInvalidRecord)
	}
}

// Many goroutines apply shuffled versions of the same keys; each key must end
// with its maximum version, and exactly the versions that raised the stored
// maximum report applied.
func TestApplyConcurrentEndsWithMax(t *testing.T) {
	s := newStore(t)
	const goroutines, versions, keys = 8, 300, 3
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for _, v := range rng.Perm(versions * keys) {
				k, ts := v%keys, uint64(v/keys+1)
				rec := val(ts, fmt.Sprintf("g%d", g))
				if ts%7 == 0 {
					rec = tomb(ts)
				}
				if _, err := s.Apply(7, fmt.Appendf(nil, "key%d", k), rec); err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for k := range keys {
		got, found, err := s.Get(7, fmt.Appendf(nil, "key%d", k))
		if err != nil || !found {
			t.Fatalf("Get key%d: found=%v err=%v", k, found, err)
		}
		// The max TS is 300 (not a multiple of 7): the winner among the
		// goroutines' values at that TS is the greatest, "g7".
		if want := val(versions, fmt.Sprintf("g%d", goroutines-1)); !sameRecord(got, want) {
			t.Errorf("key%d: got %+v, want %+v", k, got, want)
		}
	}
	if got := s.KeyCount(); got != keys {
		t.Errorf("KeyCount: got %d, want %d", got, keys)
	}
}

func TestStoreKey(t *testing.T) {
	tests := []struct {
		token uint64
		key   string
		want  []byte
	}{
		{0, "", []byte{0, 0, 0, 0, 0, 0, 0, 0}},
		{0x0102030405060708, "ab", []byte{1, 2, 3, 4, 5, 6, 7, 8, 'a', 'b'}},
		{math.MaxUint64, "z", []byte{255, 255, 255, 255, 255, 255, 255, 255, 'z'}},
	}
	for _, tt := range tests {
		sk := StoreKey(tt.token, []byte(tt.key))
		if !bytes.Equal(sk, tt.want) {
			t.Errorf("StoreKey(%d, %q): got %v, want %v", tt.token, tt.key, sk, tt.want)
		}
		token, key := SplitStoreKey(sk)
		if token != tt.token || string(key) != tt.key {
			t.Errorf("SplitStoreKey(%v): got (%d, %q), want (%d, %q)", sk, token, key, tt.token, tt.key)
		}
	}
	if token, key := SplitStoreKey([]byte{1, 2}); token != 0 || key != nil {
		t.Errorf("SplitStoreKey(short): got (%d, %v), want (0, nil)", token, key)
	}
}

// entry is one stored record of the fixture, identified by token and key.
type entry struct {
	token uint64
	key   string
}

// fixture is a known set spread over the ring, including both ends of the
// token space and two keys sharing a token.
var fixtureEntries = []entry{
	{0, "zero"},
	{1, "one"},
	{5, "five-a"},
	{5, "five-b"},
	{10, "ten"},
	{100, "hundred"},
	{math.MaxUint64 - 1, "max-1"},
	{math.MaxUint64, "max"},
}

// loadFixture applies fixtureEntries in a scrambled order and returns them
// with the byte size each one takes (store key plus encoded record).
func loadFixture(t *testing.T, s *Store) map[entry]uint64 {
	t.Helper()
	sizes := make(map[entry]uint64)
	order := slices.Clone(fixtureEntries)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for i, e := range order {
		rec := val(uint64(i+1), "v-"+e.key)
		if e.key == "five-b" {
			rec = tomb(uint64(i + 1)) // tombstones are records too
		}
		mustApply(t, s, e.token, e.key, rec)
		enc, _ := rec.MarshalBinary()
		sizes[e] = uint64(len(StoreKey(e.token, []byte(e.key))) + len(enc))
	}
	return sizes
}

var rangeTests = []struct {
	name       string
	start, end uint64
	want       []entry // in scan order
}{
	{"plain", 1, 10, []entry{{5, "five-a"}, {5, "five-b"}, {10, "ten"}}},
	{"start is exclusive end inclusive", 0, 5, []entry{{1, "one"}, {5, "five-a"}, {5, "five-b"}}},
	{"empty interior", 10, 99, nil},
	{"wraps", 100, 1, []entry{{math.MaxUint64 - 1, "max-1"}, {math.MaxUint64, "max"}, {0, "zero"}, {1, "one"}}},
	{"wraps from top", math.MaxUint64, 0, []entry{{0, "zero"}}},
	{"up to top", 100, math.MaxUint64, []entry{{math.MaxUint64 - 1, "max-1"}, {math.MaxUint64, "max"}}},
	{"whole ring from 5", 5, 5, []entry{
		{10, "ten"}, {100, "hundred"}, {math.MaxUint64 - 1, "max-1"}, {math.MaxUint64, "max"},
		{0, "zero"}, {1, "one"}, {5, "five-a"}, {5, "five-b"}}},
	{"whole ring from top is token order", math.MaxUint64, math.MaxUint64, fixtureEntries},
	{"whole ring from 0", 0, 0, append(slices.Clone(fixtureEntries[1:]), fixtureEntries[0])},
}

func scanAll(t *testing.T, s *Store, start, end uint64, after []byte) []entry {
	t.Helper()
	var got []entry
	err := s.Scan(context.Background(), start, end, after, func(sk, key []byte, rec Record) error {
		token, k := SplitStoreKey(sk)
		if string(k) != string(key) {
			t.Errorf("Scan: storeKey %x does not end in key %q", sk, key)
		}
		if want := "v-" + string(key); !rec.Tombstone && string(rec.Value) != want {
			t.Errorf("Scan %q: got value %q, want %q", key, rec.Value, want)
		}
		got = append(got, entry{token, string(key)})
		return nil
	})
	if err != nil {
		t.Fatalf("Scan(%d, %d): %v", start, end, err)
	}
	return got
}

func TestScanRanges(t *testing.T) {
	s := newStore(t)
	loadFixture(t, s)
	for _, tt := range rangeTests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scanAll(t, s, tt.start, tt.end, nil); !slices.Equal(got, tt.want) {
				t.Fatalf("Scan(%d, %d):\n got %v\nwant %v", tt.start, tt.end, got, tt.want)
			}
		})
	}
}

func TestScanResumeAfter(t *testing.T) {
	s := newStore(t)
	loadFixture(t, s)
	for _, tt := range rangeTests {
		t.Run(tt.name, func(t *testing.T) {
			for i, e := range tt.want {
				after := StoreKey(e.token, []byte(e.key))
				if got := scanAll(t, s, tt.start, tt.end, after); !slices.Equal(got, tt.want[i+1:]) {
					t.Fatalf("Scan after %v:\n got %v\nwant %v", e, got, tt.want[i+1:])
				}
			}
		})
	}
	t.Run("after a missing key", func(t *testing.T) {
		got := scanAll(t, s, 100, 1, StoreKey(math.MaxUint64, []byte("a")))
		want := []entry{{math.MaxUint64, "max"}, {0, "zero"}, {1, "one"}}
		if !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	t.Run("after outside range", func(t *testing.T) {
		for _, after := range [][]byte{StoreKey(50, nil), {1, 2}} {
			err := s.Scan(context.Background(), 100, 1, after, func([]byte, []byte, Record) error { return nil })
			if !errors.Is(err, ErrAfterOutOfRange) {
				t.Errorf("after %x: got %v, want %v", after, err, ErrAfterOutOfRange)
			}
		}
	})
}

func TestScanStops(t *testing.T) {
	s := newStore(t)
	loadFixture(t, s)
	errStop := errors.New("stop")
	calls := 0
	err := s.Scan(context.Background(), 0, 0, nil, func([]byte, []byte, Record) error {
		calls++
		return errStop
	})
	if !errors.Is(err, errStop) || calls != 1 {
		t.Errorf("fn error: got err=%v calls=%d, want %v after 1 call", err, calls, errStop)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = s.Scan(ctx, 0, 0, nil, func([]byte, []byte, Record) error {
		calls++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("cancel: got err=%v calls=%d, want %v after 1 call", err, calls, context.Canceled)
	}
}

func TestCountRange(t *testing.T) {
	s := newStore(t)
	sizes := loadFixture(t, s)
	for _, tt := range rangeTests {
		t.Run(tt.name, func(t *testing.T) {
			var wantBytes uint64
			for _, e := range tt.want {
				wantBytes += sizes[e]
			}
			keys, n, err := s.CountRange(tt.start, tt.end)
			if err != nil {
				t.Fatal(err)
			}
			if keys != uint64(len(tt.want)) || n != wantBytes {
				t.Fatalf("CountRange(%d, %d): got (%d keys, %d bytes), want (%d, %d)",
					tt.start, tt.end, keys, n, len(tt.want), wantBytes)
			}
		})
	}
}

func TestDeleteRange(t *testing.T) {
	for _, tt := range rangeTests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			loadFixture(t, s)
			if err := s.DeleteRange(tt.start, tt.end); err != nil {
				t.Fatalf("DeleteRange: %v", err)
			}
			var want []entry
			for _, e := range fixtureEntries {
				if !slices.Contains(tt.want, e) {
					want = append(want, e)
				}
			}
			got := scanAll(t, s, math.MaxUint64, math.MaxUint64, nil)
			if !slices.Equal(got, want) {
				t.Fatalf("left after DeleteRange(%d, %d):\n got %v\nwant %v", tt.start, tt.end, got, want)
			}
			if keys, _, _ := s.CountRange(tt.start, tt.end); keys != 0 {
				t.Errorf("CountRange of deleted range: got %d keys, want 0", keys)
			}
			if got := s.KeyCount(); got != int64(len(want)) {
				t.Errorf("KeyCount: got %d, want %d", got, len(want))
			}
		})
	}
}

// DeleteRange over more keys than one delete batch.
func TestDeleteRangeBatches(t *testing.T) {
	s := newStore(t)
	const n = deleteBatchKeys*2 + 17
	wb := s.db.NewWriteBatch()
	enc, _ := val(1, "x").MarshalBinary()
	for i := range n {
		if err := wb.Set(StoreKey(uint64(i%500)+1000, fmt.Appendf(nil, "k%06d", i)), enc); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, 999, "below", val(1, "v-below"))
	mustApply(t, s, 2000, "above", val(1, "v-above"))
	if err := s.DeleteRange(999, 1999); err != nil {
		t.Fatalf("DeleteRange: %v", err)
	}
	got := scanAll(t, s, 0, 0, nil)
	want := []entry{{999, "below"}, {2000, "above"}}
	if !slices.Equal(got, want) {
		t.Fatalf("left: got %v, want %v", got, want)
	}
}

func TestReopenKeepsData(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, testConfig(dir))
	mustApply(t, s, 1, "a", val(10, "alpha"))
	mustApply(t, s, 2, "b", val(11, "beta"))
	mustApply(t, s, 2, "b", tomb(12))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openTest(t, testConfig(dir))
	tests := []struct {
		token uint64
		key   string
		want  Record
	}{
		{1, "a", val(10, "alpha")},
		{2, "b", tomb(12)},
	}
	for _, tt := range tests {
		got, found, err := s.Get(tt.token, []byte(tt.key))
		if err != nil || !found || !sameRecord(got, tt.want) {
			t.Errorf("Get(%d, %q) after reopen: got %+v found=%v err=%v, want %+v", tt.token, tt.key, got, found, err, tt.want)
		}
	}
	if got := s.KeyCount(); got != 2 {
		t.Errorf("KeyCount after reopen: got %d, want 2", got)
	}
	if applied := mustApply(t, s, 1, "a", val(9, "old")); applied {
		t.Errorf("older write after reopen: got applied, want not applied")
	}
}

func TestInMemory(t *testing.T) {
	cfg := testConfig("")
	cfg.InMemory = true
	cfg.ValueThreshold = 1 << 10 // ignored: in memory there is no value log to hold a record
	s := openTest(t, cfg)
	for _, want := range []Record{val(1, "v"), bigRecord(val(2, "v"))} {
		mustApply(t, s, 3, "k", want)
		got, found, err := s.Get(3, []byte("k"))
		if err != nil || !found || !sameRecord(got, want) {
			t.Fatalf("Get: got TS %d, %d bytes, found=%v err=%v, want TS %d, %d bytes",
				got.TS, len(got.Value), found, err, want.TS, len(want.Value))
		}
	}
}

func TestClosed(t *testing.T) {
	s := newStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ops := map[string]func() error{
		"Get":         func() error { _, _, err := s.Get(1, nil); return err },
		"Apply":       func() error { _, err := s.Apply(1, nil, val(1, "")); return err },
		"Scan":        func() error { return s.Scan(context.Background(), 0, 0, nil, nil) },
		"CountRange":  func() error { _, _, err := s.CountRange(0, 0); return err },
		"DeleteRange": func() error { return s.DeleteRange(0, 0) },
		"Close":       s.Close,
	}
	for name, op := range ops {
		if err := op(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: got %v, want %v", name, err, ErrClosed)
		}
	}
}

// The value-log GC goroutine runs and Close stops it (goleak in TestMain
// checks that nothing is left behind).
func TestValueLogGCStopsOnClose(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.ValueLogGCInterval = time.Millisecond
	cfg.Badger = func(o badger.Options) badger.Options {
		// Small values go to the value log, so GC has files to look at.
		return o.WithMemTableSize(1 << 20).WithValueThreshold(16).WithValueLogFileSize(1 << 20)
	}
	s := openTest(t, cfg)
	for i := range 2000 {
		mustApply(t, s, uint64(i%10), "k", val(uint64(i+1), string(make([]byte, 512))))
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"default", func(*Config) {}, true},
		{"in memory without dir", func(c *Config) { c.Dir = ""; c.InMemory = true }, true},
		{"no dir", func(c *Config) { c.Dir = "" }, false},
		{"negative stamp cache", func(c *Config) { c.StampBytes = -1 }, false},
		{"stamp cache off", func(c *Config) { c.StampBytes = 0 }, true},
		{"negative gc interval", func(c *Config) { c.ValueLogGCInterval = -time.Second }, false},
		{"gc disabled ignores ratio", func(c *Config) { c.ValueLogGCInterval = 0; c.ValueLogGCDiscardRatio = 0 }, true},
		{"ratio zero", func(c *Config) { c.ValueLogGCDiscardRatio = 0 }, false},
		{"ratio one", func(c *Config) { c.ValueLogGCDiscardRatio = 1 }, false},
		{"negative value threshold", func(c *Config) { c.ValueThreshold = -1 }, false},
		{"value threshold above badger's", func(c *Config) { c.ValueThreshold = 1<<20 + 1 }, false},
		{"every record inline", func(c *Config) { c.ValueThreshold = 1 << 20 }, true},
		{"negative sync interval", func(c *Config) { c.SyncInterval = -time.Second }, false},
		{"no periodic sync", func(c *Config) { c.SyncInterval = 0 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.mutate(&cfg)
			err := cfg.Validate()
			if got := err == nil; got != tt.ok {
				t.Fatalf("Validate: got %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate: got %v, want %v", err, ErrInvalidConfig)
			}
		})
	}
	if _, err := Open(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Open(Config{}): got %v, want %v", err, ErrInvalidConfig)
	}
}

func TestBadgerLoggerLevels(t *testing.T) {
	var buf bytes.Buffer
	l := badgerLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Debugf("debug %d\n", 1)
	l.Infof("info %d\n", 2)
	l.Warningf("warn %d\n", 3)
	l.Errorf("error %d\n", 4)
	got := buf.String()
	for _, want := range []string{"level=WARN msg=\"warn 3\"", "level=ERROR msg=\"error 4\""} {
		if !strings.Contains(got, want) {
			t.Errorf("log: got %q, want it to contain %q", got, want)
		}
	}
	for _, dropped := range []string{"debug", "info"} {
		if strings.Contains(got, dropped) {
			t.Errorf("log: got %q, want no %s messages", got, dropped)
		}
	}
}

func TestSizeIsCurrent(t *testing.T) {
	s := newStore(t)
	lsm0, vlog0 := s.Size()
	for i := range 2000 {
		key := []byte(fmt.Sprintf("size-%d", i))
		if _, err := s.Apply(uint64(i)<<40, key, Record{TS: 1, Value: make([]byte, 512)}); err != nil {
			t.Fatal(err)
		}
	}
	lsm, vlog := s.Size()
	if got, before := lsm+vlog, lsm0+vlog0; got <= before {
		t.Fatalf("size after 1 MB of writes: got %d, want more than %d", got, before)
	}
}
