package hints

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"ringkv/internal/damagetest"
	"ringkv/internal/testclock"
	"ringkv/node/store"
)

func openHints(t *testing.T, cfg Config) *Log {
	t.Helper()
	h, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return h
}

func addHints(t *testing.T, h *Log, peer string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := h.Add(peer, fmt.Appendf(nil, "k%03d", i), store.Record{TS: uint64(i + 1), Value: []byte("0123456789")}); err != nil {
			t.Fatalf("Add %s k%03d: %v", peer, i, err)
		}
	}
}

// keysOf is the user keys of hs, in order.
func keysOf(hs []Hint) string {
	var b strings.Builder
	for i, x := range hs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(x.Key)
	}
	return b.String()
}

func queueOf(h *Log, peer string) Queue {
	for _, q := range h.Queues() {
		if q.Peer == peer {
			return q
		}
	}
	return Queue{Peer: peer}
}

// Hints persist across a close and reopen: their order, records, counts and write times;
// hints added after the reopen come after the earlier ones; removed ones stay removed.
func TestHintsPersistInOrder(t *testing.T) {
	dir := t.TempDir()
	clk := testclock.New(time.Unix(1_700_000_000, 0))
	cfg := Config{Dir: dir, Now: clk.Now}
	h := openHints(t, cfg)
	addHints(t, h, "n1", 0, 3)
	addHints(t, h, "n2", 0, 2)
	clk.Advance(time.Second)
	addHints(t, h, "n1", 3, 5)
	hs, err := h.Next("n1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Remove(hs); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}

	h = openHints(t, cfg)
	defer h.Close()
	if q := queueOf(h, "n1"); q.Count != 3 || q.Bytes == 0 || !q.Oldest.Equal(clk.Now().Add(-time.Second)) {
		t.Errorf("n1 after reopen: %+v, want 3 hints, some bytes, the oldest written at %v", q, clk.Now().Add(-time.Second))
	}
	addHints(t, h, "n1", 5, 7)
	hs, err = h.Next("n1", 100)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keysOf(hs), "k002,k003,k004,k005,k006"; got != want {
		t.Errorf("n1's hints after reopen: %s, want %s", got, want)
	}
	if hs[0].Record.TS != 3 || string(hs[0].Record.Value) != "0123456789" || hs[0].Peer != "n1" {
		t.Errorf("first hint %+v, want k002's record at TS 3", hs[0])
	}
	hs, _ = h.Next("n2", 100)
	if got, want := keysOf(hs), "k000,k001"; got != want {
		t.Errorf("n2's hints after reopen: %s, want %s", got, want)
	}
	if got, want := strings.Join(h.Peers(), ","), "n1,n2"; got != want {
		t.Errorf("peers %s, want %s", got, want)
	}
}

// Remove deletes what a peer took and counts it delivered, once; the queue empties.
func TestHintsRemoveAfterAck(t *testing.T) {
	h := openHints(t, Config{Dir: t.TempDir()})
	defer h.Close()
	addHints(t, h, "n1", 0, 4)
	hs, _ := h.Next("n1", 4)
	for range 2 { // the second Remove of the same hints is a no-op
		if err := h.Remove(hs); err != nil {
			t.Fatal(err)
		}
	}
	q := queueOf(h, "n1")
	if q.Count != 0 || q.Bytes != 0 || q.Delivered != 4 || q.Queued != 4 || !q.Oldest.IsZero() {
		t.Errorf("after the ack: %+v, want empty, 4 queued, 4 delivered", q)
	}
	if hs, _ := h.Next("n1", 10); len(hs) != 0 || len(h.Peers()) != 0 {
		t.Errorf("after the ack: %d hints left, peers %v; want none", len(hs), h.Peers())
	}
}

// Hints older than MaxAge are dropped by Expire and counted; younger ones stay.
func TestHintsAgeBound(t *testing.T) {
	clk := testclock.New(time.Unix(1_700_000_000, 0))
	h := openHints(t, Config{Dir: t.TempDir(), MaxAge: time.Hour, Now: clk.Now})
	defer h.Close()
	addHints(t, h, "n1", 0, 300) // more than one round of Expire's reads
	addHints(t, h, "n2", 0, 1)
	clk.Advance(40 * time.Minute)
	addHints(t, h, "n1", 300, 302)
	if n, err := h.Expire(); err != nil || n != 0 {
		t.Fatalf("Expire before the window: %d, %v; want 0 dropped", n, err)
	}
	clk.Advance(30 * time.Minute) // the first 301 are 70 minutes old, the last two 30
	n, err := h.Expire()
	if err != nil || n != 301 {
		t.Fatalf("Expire: %d, %v; want 301 dropped", n, err)
	}
	hs, _ := h.Next("n1", 100)
	if got, want := keysOf(hs), "k300,k301"; got != want {
		t.Errorf("n1 keeps %s, want %s", got, want)
	}
	if q := queueOf(h, "n1"); q.Dropped != 300 || q.Count != 2 {
		t.Errorf("n1: %+v, want 300 dropped, 2 left", q)
	}
	if q := queueOf(h, "n2"); q.Dropped != 1 || q.Count != 0 {
		t.Errorf("n2: %+v, want 1 dropped, none left", q)
	}
	if got := h.Dropped(); got != 301 {
		t.Errorf("Dropped = %d, want 301", got)
	}
}

// Over MaxBytes the oldest hints of the peer with the most bytes go, counted; the newest
// stay, and the total is within the bound.
func TestHintsByteBound(t *testing.T) {
	h := openHints(t, Config{Dir: t.TempDir(), MaxBytes: 1000})
	defer h.Close()
	addHints(t, h, "n2", 0, 2)
	addHints(t, h, "n1", 0, 40)
	if b := h.Bytes(); b > 1000 {
		t.Errorf("%d bytes held, want at most 1000", b)
	}
	q1, q2 := queueOf(h, "n1"), queueOf(h, "n2")
	if q1.Dropped == 0 || q1.Count == 0 || q1.Count+q1.Dropped != 40 {
		t.Errorf("n1: %+v, want some dropped, some kept, 40 in all", q1)
	}
	if q2.Count != 2 || q2.Dropped != 0 {
		t.Errorf("n2: %+v, want its 2 kept: n1 has the most", q2)
	}
	hs, _ := h.Next("n1", 100)
	if last := string(hs[len(hs)-1].Key); last != "k039" || string(hs[0].Key) != fmt.Sprintf("k%03d", q1.Dropped) {
		t.Errorf("n1 keeps %s, want the newest, k%03d..k039", keysOf(hs), q1.Dropped)
	}
}

// While the volume is full no hint is stored; it is counted as dropped.
func TestHintsDiskFull(t *testing.T) {
	var full error
	h := openHints(t, Config{Dir: t.TempDir(), Writable: func() error { return full }})
	defer h.Close()
	full = fmt.Errorf("%w: test", store.ErrDiskFull)
	err := h.Add("n1", []byte("k"), store.Record{TS: 1, Value: []byte("v")})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Add on a full disk: %v, want disk full", err)
	}
	if q := queueOf(h, "n1"); q.Count != 0 || q.Dropped != 1 {
		t.Errorf("after a full disk: %+v, want none kept, 1 dropped", q)
	}
}

// TestHintsFittedToReserve: the log's badger takes the sizes the store fits to its volume's
// reserve (Store.FitBadger through Config.Badger): on a small volume its memtable flush at
// Close must fit in what the reserve keeps free.
func TestHintsFittedToReserve(t *testing.T) {
	scfg := store.DefaultConfig()
	scfg.Dir, scfg.MinFreeDisk = t.TempDir(), store.Reserve{Bytes: 4 << 20}
	st, err := store.Open(scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := openHints(t, Config{Dir: t.TempDir(), Badger: st.FitBadger})
	defer h.Close()
	if got, want := h.db.Opts().MemTableSize, int64(256<<10); got != want {
		t.Errorf("hints memtable with a 4 MiB reserve: got %d, want %d", got, want)
	}
}

// Hints live beside the store, under its directory, and never show in its scans, counts,
// deletes or key count; the store's own files and marks are untouched.
func TestHintsInvisibleToStore(t *testing.T) {
	dir := t.TempDir()
	cfg := store.DefaultConfig()
	cfg.Dir = dir
	s, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(42, []byte("data"), store.Record{TS: 1, Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	h := openHints(t, Config{Dir: Path(dir)})
	// Keys whose bytes look like store keys of many tokens.
	for _, k := range []string{"data", "\x00\x00\x00\x00\x00\x00\x00\x2adata", "\xff\xff\xff\xff\xff\xff\xff\xffz"} {
		if err := h.Add("n1", []byte(k), store.Record{TS: 2, Value: []byte("hint")}); err != nil {
			t.Fatal(err)
		}
	}
	check := func() {
		t.Helper()
		var seen []string
		if err := s.Scan(context.Background(), 0, 0, nil, func(_, key []byte, _ store.Record) error {
			seen = append(seen, string(key))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 1 || seen[0] != "data" {
			t.Errorf("Scan of the whole ring: %q, want only the data key", seen)
		}
		if n, _, err := s.CountRange(0, 0); err != nil || n != 1 {
			t.Errorf("CountRange of the whole ring: %d, %v; want 1", n, err)
		}
		if n := s.KeyCount(); n != 1 {
			t.Errorf("KeyCount = %d, want 1", n)
		}
	}
	check()
	// Reopened (the sidecar's key count checked at Open), the store still sees one key.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = store.Open(cfg); err != nil {
		t.Fatalf("reopen the store beside hints: %v", err)
	}
	check()
	if err := s.DeleteRange(0, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if q := queueOf(h, "n1"); q.Count != 3 {
		t.Errorf("hints after the store's DeleteRange of the whole ring: %+v, want 3", q)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

// A hints directory of another layout is refused with a one-line reason.
func TestHintsFormatRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(formatKey, []byte("2")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), `hints format "2"`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Open of format 2: %v, want a one-line refusal naming the format", err)
	}
}

// TestHintsDamage: a hints database with damaged files does not keep the node from
// starting: Open logs the loss at error level, moves files it could still find to
// damaged-<time>/, opens empty, takes hints again and keeps them across a restart.
func TestHintsDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		moved  bool // the damaged files are still there to move aside
		big    bool // hints of 100 KiB too, in the value log (from 64 KiB)
	}{
		{"manifest truncated", damagetest.TruncateManifest, false, false},
		{"sst bytes flipped", damagetest.FlipTableBytes, true, false},
		{"vlog bytes flipped", func(t *testing.T, dir string) { damagetest.FlipBytes(t, damagetest.Largest(t, dir, ".vlog"), 2) }, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Dir: filepath.Join(t.TempDir(), Dir)}
			h := openHints(t, cfg)
			addHints(t, h, "n2", 0, 300)
			if tc.big {
				for i := range 4 {
					if err := h.Add("n2", fmt.Appendf(nil, "big%d", i), store.Record{TS: 1, Value: bytes.Repeat([]byte{'v'}, 100<<10)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := h.Close(); err != nil { // flushes the memtable: a table on disk
				t.Fatal(err)
			}
			tc.damage(t, cfg.Dir)

			var log bytes.Buffer
			cfg.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelError}))
			h = openHints(t, cfg)
			if q := h.Queues(); len(q) != 0 {
				t.Errorf("damaged hints opened holding %v, want none", q)
			}
			if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), "hints database damaged") {
				t.Errorf("log %q, want an error line saying the hints are damaged", log.String())
			}
			moved, _ := filepath.Glob(filepath.Join(cfg.Dir, "damaged-*", "*.sst"))
			if tc.moved && len(moved) == 0 {
				t.Errorf("no table under %s/damaged-*/", cfg.Dir)
			}
			addHints(t, h, "n3", 0, 5)
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			log.Reset()
			h = openHints(t, cfg)
			defer h.Close()
			if q := h.Queues(); len(q) != 1 || q[0].Peer != "n3" || q[0].Count != 5 {
				t.Errorf("after a restart: queues %+v, want n3 with 5", q)
			}
			if log.Len() != 0 {
				t.Errorf("log after a clean restart: %q, want nothing at error level", log.String())
			}
		})
	}
}

// A hint above the on-disk value threshold (64 KiB) is kept in memory too, where badger has
// no value log to hold it (badger v4.9.6 then indexed a pointer it never wrote: a panic).
func TestHintsLargeInMemory(t *testing.T) {
	h := openHints(t, Config{InMemory: true})
	defer h.Close()
	big := bytes.Repeat([]byte("v"), 100<<10)
	if err := h.Add("n1", []byte("big"), store.Record{TS: 1, Value: big}); err != nil {
		t.Fatal(err)
	}
	hs, err := h.Next("n1", 1)
	if err != nil || len(hs) != 1 || !bytes.Equal(hs[0].Record.Value, big) {
		t.Fatalf("Next: %d hints, err %v; want the 100 KiB hint back", len(hs), err)
	}
}
