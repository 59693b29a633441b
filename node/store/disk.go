package store

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/dgraph-io/badger/v4"
)

// Reserve is the free space a store keeps on its data volume: below it, writes are refused
// with ErrDiskFull, so badger always has room for what it must still write itself (memtable
// flushes, compactions, Close). It is the larger of Bytes and Percent of the volume's size,
// at most Cap when Cap is set.
type Reserve struct {
	Bytes   uint64
	Percent float64
	Cap     uint64
}

// DefaultReserve is 5% of the volume, at least 4 MiB and at most 1 GiB: 4 MiB on a volume of
// up to 80 MiB (a CI tmpfs, a container's scratch space), 51 MiB on a 1 GiB volume, 1 GiB from
// 20 GiB up, so a TB volume keeps 0.1% (CockroachDB's ballast is min(1%, 1 GiB)). Badger's
// memtables, tables and value-log files are fitted to the reserve (see fitReserve), so what
// badger writes on its own once writes are refused fits in it at every size; 4 MiB is the
// least that holds badger's files at their smallest.
var DefaultReserve = Reserve{Bytes: 4 << 20, Percent: 5, Cap: 1 << 30}

// MinVolume is the smallest data volume a store with a reserve opens on: the default reserve's
// floor and as much again for data. On a smaller volume Open fails with ErrVolumeTooSmall.
const MinVolume = 8 << 20

// ParseReserve parses a byte count ("1073741824", "512MiB", "1GiB") or a share of the
// volume ("5%"); "0" keeps no reserve.
func ParseReserve(s string) (Reserve, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f >= 100 {
			return Reserve{}, fmt.Errorf("%q: want a share such as 5%%, below 100%%", s)
		}
		return Reserve{Percent: f}, nil
	}
	num, mult := s, uint64(1)
	for _, u := range []struct {
		suffix string
		m      uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.m
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return Reserve{}, fmt.Errorf("%q: want a byte count such as 1GiB or a share such as 5%%", s)
	}
	return Reserve{Bytes: n * mult}, nil
}

func (r Reserve) String() string {
	pct := strconv.FormatFloat(r.Percent, 'f', -1, 64) + "%"
	switch {
	case r.Cap != 0:
		return fmt.Sprintf("%s between %s and %s", pct, size(r.Bytes), size(r.Cap))
	case r.Percent == 0:
		return strconv.FormatUint(r.Bytes, 10)
	case r.Bytes == 0:
		return pct
	}
	return fmt.Sprintf("max(%d, %s)", r.Bytes, pct)
}

// of is the reserve in bytes on a volume of total bytes.
func (r Reserve) of(total uint64) uint64 {
	n := max(r.Bytes, uint64(r.Percent*float64(total)/100))
	if r.Cap != 0 {
		n = min(n, r.Cap)
	}
	return n
}

// Volume measures the file system holding dir: its free space (what an unprivileged writer
// may still use) and its size, in bytes. The one free-disk probe of the node.
func Volume(dir string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// ballastFile holds part of the reserve in the store's directory (CockroachDB's ballast): a
// file of allocated blocks that the store deletes when the volume runs out, so that badger's
// own writes (a memtable flush into a memory-mapped file, a compaction, the flush at Close)
// find room even when another process has taken the last byte — a write into a mapped file
// on a full volume is a SIGBUS, not an error. It is made again once the volume has room.
const ballastFile = "RINGKV-BALLAST"

// disk watches the free space of a store's volume (statfs: cheap) every interval and
// before a write once the writes since the last look could have used an eighth of the
// reserve, so badger never writes into the reserve unseen. Safe for concurrent use.
type disk struct {
	dir     string
	reserve Reserve
	warn    func(msg string, args ...any)

	full    atomic.Pointer[error] // nil while there is room
	written atomic.Int64          // bytes written since the last look
	slack   atomic.Int64          // an eighth of the reserve, in bytes
	mu      sync.Mutex            // one look at a time; guards held
	held    uint64                // bytes the ballast file holds (0: none)
	free    atomic.Uint64         // free bytes, the ballast counted as free
	total   atomic.Uint64
	need    atomic.Uint64
}

// newDisk looks at dir's volume: ErrVolumeTooSmall below MinVolume.
func newDisk(dir string, r Reserve, warn func(string, ...any)) (*disk, error) {
	d := &disk{dir: dir, reserve: r, warn: warn}
	if fi, err := os.Stat(filepath.Join(dir, ballastFile)); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			d.held = uint64(st.Blocks) * 512
		}
	}
	if _, total, err := Volume(dir); err == nil && total < MinVolume {
		return nil, fmt.Errorf("%w: the data volume of %s is %s, below the minimum of %s", ErrVolumeTooSmall, dir, size(total), size(MinVolume))
	}
	d.check()
	return d, nil
}

// check looks at the volume now and sets the state; it deletes the ballast when the volume
// is full and has less room left than the ballast holds, and makes it again when there is
// room.
func (d *disk) check() {
	d.mu.Lock()
	defer d.mu.Unlock()
	free, total, err := Volume(d.dir)
	if err != nil {
		return // keep the last state: a failing statfs says nothing about space
	}
	need := d.reserve.of(total)
	avail := free + d.held
	was := d.full.Load() != nil
	// Hysteresis: once full, writes resume only with a quarter of the reserve more than it,
	// so a flush or compaction that frees a little does not flap the state.
	full := avail < need || (was && avail < need+need/4)
	switch {
	case full && d.held > 0 && free < d.held:
		// Something else took the room the reserve kept (a full disk of our own writes
		// still has most of the reserve free): the ballast gives it back to badger.
		if err := os.Remove(filepath.Join(d.dir, ballastFile)); err == nil || os.IsNotExist(err) {
			d.held = 0
		}
	case !full && d.held == 0:
		d.held = makeBallast(filepath.Join(d.dir, ballastFile), ballastSize(need))
	}
	d.free.Store(avail)
	d.total.Store(total)
	d.need.Store(need)
	d.slack.Store(int64(max(need/8, 64<<10)))
	d.written.Store(0)
	if full {
		e := fmt.Errorf("%w: %s free of %s, reserve %s (--min-free-disk)", ErrDiskFull, sizeDown(avail), size(total), size(need))
		d.full.Store(&e)
		if !was {
			d.warn("disk full: writes refused until space is freed", "free", avail, "size", total, "reserve", need, "dir", d.dir)
		}
		return
	}
	d.full.Store(nil)
	if was {
		d.warn("disk space back: writes resume", "free", avail, "size", total, "reserve", need, "dir", d.dir)
	}
}

// ballastSize is the ballast kept for a reserve: an eighth of it, at least 1 MiB (no more than
// the reserve) — four memtables of fitReserve's size, what badger writes on its own between
// a volume filling up and the writes it refuses.
func ballastSize(reserve uint64) uint64 { return min(reserve, max(reserve/8, 1<<20)) }

// room reports whether the volume has n bytes free, deleting the ballast first if it has not.
func (d *disk) room(n uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	free, _, err := Volume(d.dir)
	if err != nil {
		return false
	}
	if free < n && d.held > 0 {
		if err := os.Remove(filepath.Join(d.dir, ballastFile)); err == nil || os.IsNotExist(err) {
			free += d.held
			d.held = 0
		}
	}
	return free >= n
}

// makeBallast allocates n bytes to the file at path and returns what it holds: n, or 0 when
// the file system refuses (then it is removed; the next look tries again).
func makeBallast(path string, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 0
	}
	err = syscall.Fallocate(int(f.Fd()), 0, 0, int64(n))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return 0
	}
	return n
}

// size formats a byte count as ctl/present.Bytes does: 512 B, 1.5 KiB, 20.0 MiB.
func size(n uint64) string { return sizeOf(n, false) }

// sizeDown is size rounded down, for free space: 4,193,000 bytes free below a reserve of
// 4 MiB read "3.9 MiB", not "4.0 MiB".
func sizeDown(n uint64) string { return sizeOf(n, true) }

func sizeOf(n uint64, down bool) string {
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(1<<10), 0
	for m := n >> 10; m >= 1<<10; m >>= 10 {
		div <<= 10
		exp++
	}
	v := float64(n) / float64(div)
	if down {
		v = math.Floor(v*10) / 10
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[exp])
}

// admit is nil when a write of n bytes may go to badger, else the ErrDiskFull reason. The
// write whose look finds the volume full still goes (the slack is there for it), so the
// writes refused are those after it, refused by the node before they reach a replica: the
// client is told "disk full: …" and not that a replica failed.
func (d *disk) admit(n int) error {
	if d == nil {
		return nil
	}
	if e := d.full.Load(); e != nil {
		return *e
	}
	if d.written.Add(int64(n)) > d.slack.Load() {
		d.check()
	}
	return nil
}

// err is the ErrDiskFull reason while the volume is below the reserve, else nil.
func (d *disk) err() error {
	if d == nil {
		return nil
	}
	if e := d.full.Load(); e != nil {
		return *e
	}
	return nil
}

// watch looks at the volume now and reopens a read-only store once it has room (every
// DiskCheckInterval, see Open).
func (s *Store) watch() {
	s.disk.check()
	if s.disk.err() == nil {
		s.reopen()
	}
}

// writable is nil when a write of n bytes may go to badger: the store is not read-only and
// the volume has room (see disk.admit).
func (s *Store) writable(n int) error {
	if s.readOnly.Load() {
		if err := s.disk.err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: opened read-only on a full disk; reopening for writes", ErrDiskFull)
	}
	return s.disk.admit(n)
}

// reopen turns a store opened read-only on a full disk into a writable one once the volume
// has room: it waits out the calls in flight, closes the read-only badger and opens it
// read-write (which flushes the logs it replayed). On a failure the store stays read-only
// and the next check tries again.
func (s *Store) reopen() {
	if !s.readOnly.Load() {
		return
	}
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.closed.Load() {
		return
	}
	if err := s.db.Close(); err != nil {
		s.logger.Warn("reopen for writes: close read-only badger", "err", err)
	}
	s.stamps.init(s.cfg.StampBytes) // nothing is remembered of the store that closed
	opts := fitReserve(s.cfg.badgerOptions(s.logger), s.disk.need.Load())
	db, err := badger.Open(opts)
	if err != nil {
		s.logger.Error("reopen for writes", "err", err)
		// Back to reading: the data must stay readable.
		if db, err = badger.Open(opts.WithReadOnly(true)); err != nil {
			s.logger.Error("reopen read-only", "err", err)
			return
		}
		s.db = db
		return
	}
	s.db = db
	s.readOnly.Store(false)
	s.logger.Info("disk space back: store reopened for writes")
}

// FitBadger fits the options of another badger database on the store's volume (the hints')
// to the store's reserve as the store's own are (see fitReserve), so that its flushes and
// compactions after writes stop fit in the reserve too. Unchanged without a reserve.
func (s *Store) FitBadger(opts badger.Options) badger.Options {
	if s.disk == nil {
		return opts
	}
	return fitReserve(opts, s.disk.need.Load())
}

// CheckDisk looks at the volume now (as the store does every DiskCheckInterval): when
// something else has filled it, it deletes the ballast, so that what badger writes on its own
// next finds room. It reports whether the volume has room for badger's flushes at Close (two
// of the store's memtables: the store's and the hints'); without it a database on the volume
// is best left unclosed, as after a crash (its write-ahead log is replayed at the next start).
func (s *Store) CheckDisk() (room bool) {
	if s.disk == nil {
		return true
	}
	s.disk.check()
	return s.roomToFlush()
}

// roomToFlush reports whether the volume has room for two of the store's memtables.
func (s *Store) roomToFlush() bool {
	free, _, err := Volume(s.cfg.Dir)
	return err != nil || free >= 2*uint64(s.memtable)
}

// DiskFull is nil while the store's volume has more free space than its reserve, else an
// error wrapping ErrDiskFull that says how much is free: then Apply and ApplyBatch refuse.
func (s *Store) DiskFull() error { return s.disk.err() }

// Disk returns the free space of the store's volume (its ballast counted as free), the
// volume's size and the reserve, in bytes, as last measured (zeros in memory or without a
// reserve).
func (s *Store) Disk() (free, total, reserve uint64) {
	if s.disk == nil {
		return 0, 0, 0
	}
	return s.disk.free.Load(), s.disk.total.Load(), s.disk.need.Load()
}

// fitReserve fits badger's sizes to the reserve R, so that what badger writes on its own
// once writes are refused — flushing its memtables, compacting level 0 into the base level,
// its flush at Close — fits in it, at every size from a few MiB to TBs:
//   - memtables of R/32 (between 256 KiB and badger's default): five to flush are 5/32 of R;
//   - level 0 stalls writes at eight tables and the base level is R/16, so a level-0
//     compaction rewrites at most about R/4 + R/8; tables below are R/64, so a compaction
//     between lower levels (one table and the ten or so it overlaps) rewrites about R/4;
//   - values from R/256 up go to the value log, whose files are R/4 (between 1 MiB and
//     badger's default): tables then hold keys and pointers, and a value-log GC (never run
//     while the disk is full) rewrites at most one file.
//
// Badger's defaults stand wherever they are smaller (a reserve of 2 GiB or more).
func fitReserve(opts badger.Options, reserve uint64) badger.Options {
	if reserve == 0 {
		return opts
	}
	r := int64(reserve)
	mt := min(opts.MemTableSize, max(r/32, 256<<10))
	opts = opts.WithMemTableSize(mt).
		WithNumLevelZeroTablesStall(min(opts.NumLevelZeroTablesStall, opts.NumLevelZeroTables+3)).
		WithBaseLevelSize(min(opts.BaseLevelSize, max(r/16, 1<<20))).
		WithBaseTableSize(min(opts.BaseTableSize, max(r/64, 64<<10))).
		WithValueLogFileSize(min(opts.ValueLogFileSize, max(r/4, 1<<20)))
	// badger refuses a value threshold above 15% of the memtable (its largest batch).
	if limit := min(mt*15/100/2, max(r/256, 1<<10)); opts.ValueThreshold > limit {
		opts = opts.WithValueThreshold(limit)
	}
	return opts
}
