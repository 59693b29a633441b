package store

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"ringkv/internal/eventually"
)

func TestParseReserve(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Reserve
		bad  bool
	}{
		{in: "1GiB", want: Reserve{Bytes: 1 << 30}},
		{in: "512MiB", want: Reserve{Bytes: 512 << 20}},
		{in: "4096", want: Reserve{Bytes: 4096}},
		{in: "5%", want: Reserve{Percent: 5}},
		{in: "0", want: Reserve{}},
		{in: "100%", bad: true},
		{in: "-1", bad: true},
		{in: "lots", bad: true},
	} {
		got, err := ParseReserve(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseReserve(%q): got %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
	for _, tc := range []struct{ volume, want uint64 }{
		{16 << 20, 4 << 20},     // the floor
		{1 << 30, 1 << 30 / 20}, // 5%
		{100 << 30, 1 << 30},    // the cap
		{10 << 40, 1 << 30},
	} {
		if got := DefaultReserve.of(tc.volume); got != tc.want {
			t.Errorf("default reserve of %s: got %d, want %d", size(tc.volume), got, tc.want)
		}
	}
}

func TestSizeDown(t *testing.T) {
	for _, tc := range []struct {
		n          uint64
		size, down string
	}{
		{4<<20 - 2000, "4.0 MiB", "3.9 MiB"},
		{4 << 20, "4.0 MiB", "4.0 MiB"},
		{1536, "1.5 KiB", "1.5 KiB"},
		{512, "512 B", "512 B"},
	} {
		if got := size(tc.n); got != tc.size {
			t.Errorf("size(%d): got %q, want %q", tc.n, got, tc.size)
		}
		if got := sizeDown(tc.n); got != tc.down {
			t.Errorf("sizeDown(%d): got %q, want %q", tc.n, got, tc.down)
		}
	}
}

// TestDiskFullRefusesWrites: a store whose volume is below its reserve opens (read-only),
// refuses Apply and ApplyBatch with ErrDiskFull before badger sees them, and still reads.
func TestDiskFullRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, testConfig(dir))
	if _, err := s.Apply(1, []byte("k"), val(1, "v")); err != nil {
		t.Fatal(err)
	}
	s.Close()

	cfg := testConfig(dir)
	cfg.MinFreeDisk = Reserve{Bytes: 1 << 62} // more than any volume has
	s = openTest(t, cfg)
	if err := s.DiskFull(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("DiskFull: got %v, want ErrDiskFull", err)
	}
	if _, err := s.Apply(2, []byte("k2"), val(2, "v")); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Apply on a full disk: got %v, want ErrDiskFull", err)
	}
	if _, err := s.ApplyBatch([]Entry{{Token: 3, Key: []byte("k3"), Record: val(3, "v")}}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("ApplyBatch on a full disk: got %v, want ErrDiskFull", err)
	}
	rec, found, err := s.Get(1, []byte("k"))
	if err != nil || !found || string(rec.Value) != "v" {
		t.Fatalf("Get on a full disk: got %q %v %v, want \"v\" true nil", rec.Value, found, err)
	}
	if _, found, _ := s.Get(2, []byte("k2")); found {
		t.Fatalf("a refused write is stored")
	}
	if free, _, reserve := s.Disk(); free == 0 || reserve != 1<<62 {
		t.Fatalf("Disk: got free %d reserve %d, want free > 0, reserve %d", free, reserve, uint64(1<<62))
	}

	// Space back (the reserve lowered): the store reopens for writes by itself.
	s.disk.mu.Lock()
	s.disk.reserve = Reserve{Bytes: 1}
	s.disk.mu.Unlock()
	eventually.Succeeds(t, 10*time.Second, func() error {
		_, err := s.Apply(2, []byte("k2"), val(2, "v2"))
		return err
	})
	for _, k := range []struct {
		token uint64
		key   string
	}{{1, "k"}, {2, "k2"}} {
		if _, found, err := s.Get(k.token, []byte(k.key)); !found || err != nil {
			t.Fatalf("Get %s after reopening: got found %v, %v; want found", k.key, found, err)
		}
	}
}

// TestNewStoreOnFullDisk: a new, empty store on a volume below its reserve opens (a full
// disk is not damage: badger's read-only open would want a MANIFEST a new store has not
// written yet), refuses writes with the free space and reserve in one line, and takes writes
// once there is room, holding a ballast of an eighth of the reserve from then on.
func TestNewStoreOnFullDisk(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MinFreeDisk = Reserve{Bytes: 1 << 62}
	s := openTest(t, cfg)
	err := s.DiskFull()
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), " free of ") || !strings.HasSuffix(err.Error(), "(--min-free-disk)") {
		t.Fatalf("DiskFull: got %v, want \"disk full: X free of Y, reserve Z (--min-free-disk)\"", err)
	}
	if _, err := s.Apply(1, []byte("k"), val(1, "v")); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Apply on a full disk: got %v, want ErrDiskFull", err)
	}
	if _, found, err := s.Get(1, []byte("k")); found || err != nil {
		t.Fatalf("Get on a full disk: got found %v, %v; want not found, nil", found, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, ballastFile)); !os.IsNotExist(err) {
		t.Fatalf("ballast on a full disk: got %v, want none", err)
	}

	s.disk.mu.Lock()
	s.disk.reserve = Reserve{Bytes: 8 << 20}
	s.disk.mu.Unlock()
	eventually.Succeeds(t, 10*time.Second, func() error {
		_, err := s.Apply(1, []byte("k"), val(1, "v"))
		return err
	})
	fi, err := os.Stat(filepath.Join(cfg.Dir, ballastFile))
	if err != nil || fi.Size() != 1<<20 {
		t.Fatalf("ballast with room: got %v, %v; want %d bytes", fi, err, 1<<20)
	}
}

// TestFitReserve: badger opens with its sizes fitted to reserves from the smallest to the
// default on a large volume, each memtable at most a sixteenth of the reserve.
func TestFitReserve(t *testing.T) {
	for _, reserve := range []uint64{1 << 20, 4 << 20, 51 << 20, 1 << 30} {
		cfg := testConfig(t.TempDir())
		opts := fitReserve(cfg.badgerOptions(slog.Default()), reserve)
		db, err := badger.Open(opts)
		if err != nil {
			t.Fatalf("reserve %s: badger.Open: %v", size(reserve), err)
		}
		db.Close()
		if opts.MemTableSize > int64(reserve)/16 && opts.MemTableSize > 256<<10 {
			t.Errorf("reserve %s: memtable %d, want at most a sixteenth of it", size(reserve), opts.MemTableSize)
		}
	}
}
