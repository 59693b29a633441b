package store

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/dgraph-io/badger/v4"
)

// Reserve is the free space a store keeps on its data volume: below it, writes are refused
// with ErrDiskFull, so badger always has room for what it must still write itself (memtable
// flushes, compactions, Close). It is the larger of Bytes and Percent of the volume's size.
type Reserve struct {
	Bytes   uint64
	Percent float64
}

// DefaultReserve is max(1 GiB, 5%) of the volume.
var DefaultReserve = Reserve{Bytes: 1 << 30, Percent: 5}

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
	switch {
	case r.Percent == 0:
		return strconv.FormatUint(r.Bytes, 10)
	case r.Bytes == 0:
		return strconv.FormatFloat(r.Percent, 'f', -1, 64) + "%"
	}
	return fmt.Sprintf("max(%d, %s%%)", r.Bytes, strconv.FormatFloat(r.Percent, 'f', -1, 64))
}

// of is the reserve in bytes on a volume of total bytes.
func (r Reserve) of(total uint64) uint64 {
	return max(r.Bytes, uint64(r.Percent*float64(total)/100))
}

// volume is the space of the file system holding dir.
func volume(dir string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

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
	mu      sync.Mutex            // one look at a time
	free    atomic.Uint64
	need    atomic.Uint64
}

// check looks at the volume now and sets the state.
func (d *disk) check() {
	d.mu.Lock()
	defer d.mu.Unlock()
	free, total, err := volume(d.dir)
	if err != nil {
		return // keep the last state: a failing statfs says nothing about space
	}
	need := d.reserve.of(total)
	d.free.Store(free)
	d.need.Store(need)
	d.slack.Store(int64(max(need/8, 64<<10)))
	d.written.Store(0)
	was := d.full.Load() != nil
	// Hysteresis: once full, writes resume only with a quarter of the reserve more than it,
	// so a flush or compaction that frees a little does not flap the state.
	if free < need || (was && free < need+need/4) {
		e := fmt.Errorf("%w: %s free on the data volume of %s, below the reserve of %s (--min-free-disk); writes refused",
			ErrDiskFull, mib(free), d.dir, mib(need))
		d.full.Store(&e)
		if !was {
			d.warn("disk full: writes refused until space is freed", "free", free, "reserve", need, "dir", d.dir)
		}
		return
	}
	d.full.Store(nil)
	if was {
		d.warn("disk space back: writes resume", "free", free, "reserve", need, "dir", d.dir)
	}
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// admit is nil when a write of n bytes may go to badger, else the ErrDiskFull reason.
func (d *disk) admit(n int) error {
	if d == nil {
		return nil
	}
	if d.written.Add(int64(n)) > d.slack.Load() {
		d.check()
	}
	if e := d.full.Load(); e != nil {
		return *e
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

// DiskFull is nil while the store's volume has more free space than its reserve, else an
// error wrapping ErrDiskFull that says how much is free: then Apply and ApplyBatch refuse.
func (s *Store) DiskFull() error { return s.disk.err() }

// Disk returns the free space of the store's volume and its reserve, in bytes, as last
// measured (0, 0 in memory).
func (s *Store) Disk() (free, reserve uint64) {
	if s.disk == nil {
		return 0, 0
	}
	return s.disk.free.Load(), s.disk.need.Load()
}

// fitReserve shrinks badger's memtable (and with it the largest value kept in the LSM tree)
// so that what badger writes on its own — a memtable flush, an L0 compaction of five of
// them — fits in the reserve: 1/8 of it per memtable, between 1 MiB and badger's default.
func fitReserve(opts badger.Options, reserve uint64) badger.Options {
	if reserve == 0 {
		return opts
	}
	mt := min(opts.MemTableSize, max(int64(reserve/8), 1<<20))
	opts = opts.WithMemTableSize(mt)
	// badger refuses a value threshold above 15% of the memtable (its largest batch).
	if limit := mt * 15 / 100 / 2; opts.ValueThreshold > limit {
		opts = opts.WithValueThreshold(limit)
	}
	return opts
}
