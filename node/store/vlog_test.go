package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"ringkv/internal/damagetest"
)

// Records above the value threshold live in the value log: after overwrites, deletes and
// a reopen, every key reads back as the model says, by Get and by Scan, and a write older
// than the stored record still loses with the stamp cache off (the check reads the log).
func TestValueLogRecordsReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.StampBytes, cfg.ValueThreshold = 0, 1<<10
	s := openTest(t, cfg)
	const n = 300
	value := func(i, gen int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%d.%d;", i, gen)), 600) }
	model := map[string]Record{}
	for i := range n {
		key := fmt.Sprintf("k%03d", i)
		rec := Record{TS: 10, Value: value(i, 0)}
		switch i % 3 {
		case 1: // overwritten by a newer value
			mustApply(t, s, uint64(i)<<50, key, rec)
			rec = Record{TS: 20, Value: value(i, 1)}
		case 2: // deleted
			mustApply(t, s, uint64(i)<<50, key, rec)
			rec = tomb(20)
		}
		mustApply(t, s, uint64(i)<<50, key, rec)
		model[key] = rec
	}
	if _, vlog := s.Size(); vlog < n*4<<10 {
		t.Fatalf("value log after %d writes of ~4 KiB: %d bytes, want them there", n, vlog)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, cfg)
	for i := range n {
		key := fmt.Sprintf("k%03d", i)
		got, found, err := s.Get(uint64(i)<<50, []byte(key))
		if want := model[key]; err != nil || !found || !sameRecord(got, want) {
			t.Fatalf("Get(%s) after reopen: TS %d, %d bytes, found=%v err=%v; want TS %d, %d bytes",
				key, got.TS, len(got.Value), found, err, want.TS, len(want.Value))
		}
		if applied := mustApply(t, s, uint64(i)<<50, key, Record{TS: 5, Value: value(i, 2)}); applied {
			t.Fatalf("write at TS 5 over %s's TS %d: applied, want refused", key, model[key].TS)
		}
	}
	seen := 0
	err := s.Scan(context.Background(), 0, 0, nil, func(_ []byte, key []byte, rec Record) error {
		if want, ok := model[string(key)]; !ok || !sameRecord(rec, want) {
			return fmt.Errorf("scan: %s at TS %d with %d bytes, not the record written (key written: %v)", key, rec.TS, len(rec.Value), ok)
		}
		seen++
		return nil
	})
	if err != nil || seen != n {
		t.Fatalf("Scan after reopen: %d records, err %v; want %d", seen, err, n)
	}
}

// The store syncs badger's logs every SyncInterval, so the value log holds few pages not
// yet written to disk: a rotation then writes back little in badger's one write goroutine.
// Dirty pages are read from /proc/self/smaps, the value log being a shared file mapping.
// Without the sync (SyncInterval 0) the same writes leave their ~8 MiB dirty for the
// kernel's 30-s writeback.
func TestSyncIntervalWritesValueLogBack(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skip("needs /proc/self/smaps (Linux)")
	}
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.SyncInterval, cfg.ValueThreshold = 20*time.Millisecond, 1<<10
	s := openTest(t, cfg)
	value := bytes.Repeat([]byte{'v'}, 4<<10)
	for i := range 2048 { // 8 MiB
		mustApply(t, s, uint64(i)<<40, "k", Record{TS: 1, Value: value})
	}
	var dirty int64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var mapped int64
		dirty, mapped = vlogDirty(t, dir)
		if mapped == 0 {
			t.Fatalf("no value-log file of %s mapped", dir)
		}
		if dirty < 1<<20 {
			return
		}
	}
	t.Fatalf("value log %d KiB dirty 10 s after the writes, want under 1 MiB: its pages are not synced", dirty>>10)
}

// vlogDirty sums the dirty bytes and the size of this process's mappings of .vlog files in dir.
func vlogDirty(t *testing.T, dir string) (dirty, mapped int64) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") { // a mapping's header line: range perms offset dev inode [path]
			in = len(fields) >= 6 && strings.HasPrefix(fields[5], dir) && strings.HasSuffix(fields[5], ".vlog")
			continue
		}
		if !in || len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "Size:":
			mapped += kb << 10
		case "Shared_Dirty:", "Private_Dirty:":
			dirty += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return dirty, mapped
}

// filledLog writes n records of 4 KiB into a new store in dir, into value-log files of
// 1 MiB (several of them), and closes it.
func filledLog(t *testing.T, dir string, n int) {
	t.Helper()
	s := openTest(t, logConfig(dir))
	for i := range n {
		key := fmt.Sprintf("key-%05d", i)
		if _, err := s.Apply(uint64(i)*7919, []byte(key), Record{TS: uint64(i + 1), Value: bytes.Repeat([]byte(key), 400)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func logConfig(dir string) Config {
	cfg := testConfig(dir)
	cfg.ValueThreshold = 1 << 10
	cfg.Badger = func(o badger.Options) badger.Options {
		return o.WithMemTableSize(8 << 20).WithNumMemtables(2).WithBlockCacheSize(1 << 20).WithValueLogFileSize(1 << 20)
	}
	return cfg
}

// vlogFiles are dir's value-log files, oldest first.
func vlogFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	sort.Strings(files)
	if len(files) < 3 {
		t.Fatalf("%d value-log files in %s, want several", len(files), dir)
	}
	return files
}

// A flipped byte in a value-log file, the newest or an older one, or an older one cut short,
// refuses the store, or with Recover opens it marked damaged (TestDamageDetected for tables
// and the MANIFEST).
func TestValueLogDamageDetected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, files []string)
	}{
		{"older file flipped", func(t *testing.T, f []string) { damagetest.FlipBytes(t, f[0], 3) }},
		{"newest file flipped", func(t *testing.T, f []string) { damagetest.FlipBytes(t, f[len(f)-1], 3) }},
		{"older file truncated", func(t *testing.T, f []string) { damagetest.Truncate(t, f[1], 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			filledLog(t, dir, 1000)
			tc.damage(t, vlogFiles(t, dir))
			s, err := Open(logConfig(dir))
			if err == nil {
				s.Close()
				t.Fatal("Open of a store with a damaged value log: opened, want ErrDamaged")
			}
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "value log") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Open: got %q, want one line wrapping ErrDamaged naming the value log", err)
			}
			t.Logf("refused: %v", err)
			cfg := logConfig(dir)
			cfg.Recover = true
			s = openTest(t, cfg)
			if s.Damage() == "" || !s.Damaged(0) {
				t.Fatalf("Open with Recover: Damage %q, want what was found and every token marked", s.Damage())
			}
		})
	}
}

// A process killed while it wrote (kill -9: the page cache holds everything written, the
// newest value-log file preallocated and zero past its entries, perhaps one entry cut short)
// is not damage: the copy of a store left open opens whole, every key readable. Bytes after
// a hole in the newest file are damage, as they are after zeros, within the reader's buffer
// (256 KiB on) or past it (1.2 MiB on, found by SEEK_DATA).
func TestValueLogCrashImageOpens(t *testing.T) {
	for _, tc := range []struct {
		torn    int   // bytes of an entry after the whole ones, cut short
		gap     int64 // where they are written past the last entry
		damaged bool
	}{{0, 0, false}, {100, 0, false}, {3000, 0, false}, {3000, 256 << 10, true}, {3000, 1200 << 10, true}} {
		torn := tc.torn
		t.Run(fmt.Sprintf("torn %d at +%d", torn, tc.gap), func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, logConfig(dir))
			const n = 600
			for i := range n {
				mustApply(t, s, uint64(i)<<40, fmt.Sprintf("k%d", i), Record{TS: 1, Value: bytes.Repeat([]byte{byte(i)}, 4000)})
			}
			// The image: every file's bytes up to its last one not zero, then a hole to its
			// length, as the preallocated files of a live store are.
			image := t.TempDir()
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				path, end := filepath.Join(image, filepath.Base(f)), len(b)
				for end > 0 && b[end-1] == 0 {
					end--
				}
				if err := os.WriteFile(path, b[:end], 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(path, int64(len(b))); err != nil {
					t.Fatal(err)
				}
			}
			if torn > 0 {
				// The newest file's next entry, cut short: a copy of its first entry's first bytes
				// where the next write would have gone.
				newest := vlogFiles(t, image)
				path := newest[len(newest)-1]
				b, _ := os.ReadFile(path)
				end := len(b)
				for end > 0 && b[end-1] == 0 {
					end--
				}
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt(b[vlogFileHeader:vlogFileHeader+torn], int64(end)+tc.gap); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			os.Remove(filepath.Join(image, "LOCK"))
			if tc.damaged {
				if c, err := Open(logConfig(image)); !errors.Is(err, ErrDamaged) {
					if err == nil {
						c.Close()
					}
					t.Fatalf("Open of an image with data after a hole: got %v, want ErrDamaged", err)
				}
				return
			}
			c := openTest(t, logConfig(image))
			if d := c.Damage(); d != "" {
				t.Fatalf("the image of a store left open: damage %q, want none", d)
			}
			for i := range n {
				if _, found, err := c.Get(uint64(i)<<40, []byte(fmt.Sprintf("k%d", i))); err != nil || !found {
					t.Fatalf("Get(k%d) in the image: found=%v err=%v", i, found, err)
				}
			}
		})
	}
}
