package store

import (
	"errors"
	"testing"
	"time"

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
	if got, want := DefaultReserve.of(100<<30), uint64(5<<30); got != want {
		t.Errorf("default reserve of 100 GiB: got %d, want %d", got, want)
	}
	if got, want := DefaultReserve.of(4<<30), uint64(1<<30); got != want {
		t.Errorf("default reserve of 4 GiB: got %d, want %d", got, want)
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
	if free, reserve := s.Disk(); free == 0 || reserve != 1<<62 {
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
