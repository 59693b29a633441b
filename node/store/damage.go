package store

import (
	"crypto/rand"
	"log/slog"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Damaged data is noticed at Open in three ways, so that a store is never served as if whole
// when it is not:
//   - the checksum of every table's blocks and of every value-log entry is verified before
//     badger opens them (verifyTables, verifyValueLogs), and badger verifies every block and
//     value it reads (a flipped byte is an error, never a wrong value);
//   - a panic of badger on a malformed file (a truncated table) becomes an error;
//   - a sidecar file, marksFile, holds the store's identity and high-water marks: the keys it
//     held (lowered before a DeleteRange, raised about every second and at Close) and the
//     newest timestamp it applied. A store that opens without its MANIFEST while the sidecar
//     says it held data, or with fewer keys than the sidecar, lost files (a deleted or
//     truncated MANIFEST, a truncated write-ahead log).
//
// Open then fails with ErrDamaged and a one-line reason; with Config.Recover it opens what
// is left (the damaged files moved aside to damaged-<time>/ when badger cannot open them)
// and Damage says what was found.

// marksFile is the sidecar's name in the store's directory.
const marksFile = "RINGKV-MARKS"

// marks is the sidecar's content.
type marks struct {
	// ID names the store: set when it is created, kept for its life.
	ID string `json:"id"`
	// Keys is a lower bound of the records the store holds.
	Keys int64 `json:"keys"`
	// MaxTS is the newest record timestamp applied (an HLC).
	MaxTS uint64 `json:"max_ts"`
	// Damaged are the token spans marked damaged (see marked.go), Damage what was found,
	// Unrepairable the ranges cleared with no other replica to repair them from.
	Damaged      []TokenSpan `json:"damaged,omitempty"`
	Damage       string      `json:"damage,omitempty"`
	Unrepairable int         `json:"unrepairable,omitempty"`
}

// keysSlack is the shortfall of keys at Open tolerated against the sidecar: the store's key
// counter may drift by a few when a DeleteRange races writes to its range (see Store.keys).
func keysSlack(recorded int64) int64 { return max(16, recorded/200) }

func readMarks(dir string) (marks, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, marksFile))
	if errors.Is(err, os.ErrNotExist) {
		return marks{}, false, nil
	}
	if err != nil {
		return marks{}, false, err
	}
	var m marks
	if err := json.Unmarshal(b, &m); err != nil {
		return marks{}, false, fmt.Errorf("%s: %w", marksFile, err)
	}
	return m, true, nil
}

// writeMarks replaces the sidecar atomically.
func writeMarks(dir string, m marks) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, marksFile), append(b, '\n'))
}

// WriteFileAtomic replaces path with b: written to path.tmp, fsynced, renamed over path, and
// the directory fsynced, so that after a crash path holds either the old or the new content.
func WriteFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func newStoreID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// hasBadgerFiles reports whether dir holds any badger data file.
func hasBadgerFiles(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".sst", ".vlog", ".mem":
			return true
		}
	}
	return false
}

// quarantine moves badger's files out of dir into dir/damaged-<time>/ (for an operator, or
// a later repair, to look at), so that badger opens an empty store there.
func quarantine(dir string) (string, error) {
	dst := filepath.Join(dir, "damaged-"+time.Now().UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == marksFile || name == ballastFile || name == "LOCK" {
			continue
		}
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(dst, name)); err != nil {
			return "", err
		}
	}
	return dst, nil
}

// marker keeps the sidecar's high-water marks current. Safe for concurrent use.
type marker struct {
	dir string

	mu    sync.Mutex
	m     marks
	dirty bool // m changed since it was last written (true at first: always written once)
}

// set records keys and maxTS as the new marks (keys may also go down: after a DeleteRange).
func (k *marker) set(keys int64, maxTS uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ts := max(k.m.MaxTS, maxTS)
	if keys != k.m.Keys || ts != k.m.MaxTS {
		k.m.Keys, k.m.MaxTS, k.dirty = keys, ts, true
	}
}

// setDamaged records the damaged spans, the damage and the unrepairable ranges' count.
func (k *marker) setDamaged(spans []TokenSpan, damage string, unrepairable int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m.Damaged, k.m.Damage, k.m.Unrepairable, k.dirty = spans, damage, unrepairable, true
}

// flush writes the marks when they changed since the last write.
func (k *marker) flush() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.dirty {
		return nil
	}
	if err := writeMarks(k.dir, k.m); err != nil {
		return fmt.Errorf("write %s: %w", marksFile, err)
	}
	k.dirty = false
	return nil
}

// checkOpened compares what badger opened with the sidecar: the reason of damage, or "".
func checkOpened(had bool, m marks, manifest bool, keys int64) string {
	switch {
	case !had:
		return ""
	case !manifest && m.Keys > 0:
		return fmt.Sprintf("MANIFEST missing while the store held %d keys", m.Keys)
	case keys < m.Keys-keysSlack(m.Keys):
		return fmt.Sprintf("opened with %d keys, fewer than the %d it held (MANIFEST or write-ahead log truncated?)", keys, m.Keys)
	}
	return ""
}

// panicError turns a recovered panic of badger into an error.
func panicError(p any) error {
	s := strings.ReplaceAll(fmt.Sprint(p), "\n", " ")
	return fmt.Errorf("badger panicked: %s", s)
}

// openChecked opens badger with the damage checks of this file: it returns the database,
// its key count, the sidecar's marks to keep, and (with cfg.Recover) what was found damaged.
func openChecked(cfg Config, opts badger.Options, logger *slog.Logger) (db *badger.DB, keys int64, m marks, damage string, err error) {
	var had, manifest bool
	if !cfg.InMemory {
		if m, had, err = readMarks(cfg.Dir); err != nil {
			damage = err.Error()
		}
		_, serr := os.Stat(filepath.Join(cfg.Dir, "MANIFEST"))
		manifest = serr == nil
		if damage == "" && had && !manifest && m.Keys > 0 {
			damage = fmt.Sprintf("MANIFEST missing while the store held %d keys", m.Keys)
		}
	}
	refuse := func(reason string) error {
		return fmt.Errorf("%w in %s: %s; start with --recover to serve what is left and repair from the peers", ErrDamaged, cfg.Dir, oneLine(reason))
	}
	if damage != "" {
		if !cfg.Recover {
			return nil, 0, m, "", refuse(damage)
		}
		// Badger would delete the tables its MANIFEST does not name: keep them aside.
		if hasBadgerFiles(cfg.Dir) {
			if dst, qerr := quarantine(cfg.Dir); qerr == nil {
				damage += "; files moved to " + dst
			}
		}
	}
	if !cfg.InMemory && !opts.ReadOnly {
		if bad := verifyFiles(cfg.Dir, opts); bad != "" {
			if !cfg.Recover {
				return nil, 0, m, "", refuse(bad)
			}
			damage = join(damage, bad)
			// An unopenable table: badger would panic opening it, in a goroutine of its own.
			// A table with a bad block: its reads, and so every scan and repair tree of its
			// ranges, would fail until it is gone. A value-log entry that does not check: its
			// key's reads would fail, and badger would cut the newest file short there. Either
			// way start afresh: every token is marked damaged and repaired from the peers.
			dst, qerr := quarantine(cfg.Dir)
			if qerr != nil {
				return nil, 0, m, "", fmt.Errorf("%w: move damaged files aside: %v", ErrDamaged, qerr)
			}
			damage = join(damage, "files moved to "+dst)
		}
	}
	db, err = openBadger(opts)
	if err != nil && opts.ReadOnly && strings.Contains(err.Error(), "truncate required") {
		// A write-ahead log left by a crash (or a stop on a full disk) is replayed by
		// truncating it, which a read-only open cannot do: not damage, a disk too full to
		// replay it.
		return nil, 0, m, "", fmt.Errorf("%w: opening %s needs room to replay its write-ahead log (%s free is enough); free space on the data volume", ErrDiskFull, cfg.Dir, size(uint64(2*opts.MemTableSize)))
	}
	if err != nil && !isDamage(err) {
		return nil, 0, m, "", fmt.Errorf("open badger %q: %w", cfg.Dir, err)
	}
	if err != nil {
		if !cfg.Recover {
			return nil, 0, m, "", refuse(err.Error())
		}
		damage = join(damage, oneLine(err.Error()))
		dst, qerr := quarantine(cfg.Dir)
		if qerr != nil {
			return nil, 0, m, "", fmt.Errorf("%w: move damaged files aside: %v", ErrDamaged, qerr)
		}
		damage = join(damage, "files moved to "+dst)
		if db, err = openBadger(opts); err != nil {
			return nil, 0, m, "", fmt.Errorf("open badger %q after moving damaged files aside: %w", cfg.Dir, err)
		}
	}
	n, err := countAll(db)
	if err != nil {
		if !cfg.Recover {
			return nil, 0, m, "", errors.Join(refuse("count keys: "+err.Error()), db.Close())
		}
		damage = join(damage, "count keys: "+err.Error())
	}
	if reason := checkOpened(had, m, true, n); reason != "" {
		if !cfg.Recover {
			return nil, 0, m, "", errors.Join(refuse(reason), db.Close())
		}
		damage = join(damage, reason)
	}
	if !had {
		m.ID = newStoreID()
	}
	if damage != "" {
		logger.Error("store opened with --recover on damaged data: acknowledged writes may be missing until repaired", "damage", damage)
		// Nothing found says which keys went: every token is marked until repaired.
		m.Damaged = union(m.Damaged, allTokens)
		m.Damage = join(m.Damage, damage)
	} else if len(m.Damaged) > 0 {
		logger.Warn("store holds ranges marked damaged at an earlier start, not yet repaired from the peers", "spans", len(m.Damaged), "damage", m.Damage)
	}
	return db, n, m, m.Damage, nil
}

// verifyFiles checks dir's tables (verifyTables), then its value log (verifyValueLogs): bad
// names the first damage found ("" when all are whole).
func verifyFiles(dir string, opts badger.Options) (bad string) {
	if bad = verifyTables(dir, opts); bad == "" {
		bad = verifyValueLogs(dir)
	}
	return bad
}

// verifyTables checks every table in dir as badger would open it, and every block's
// checksum: bad names the first damaged table and why ("" when all are whole).
//
// Only the tables the MANIFEST lists are checked when it can be read: a table a compaction or
// a flush was writing when the process was killed is not listed yet, and badger deletes it at
// Open (a node killed mid-compaction was refused as damaged, for a half-written table that
// held nothing acknowledged). When the MANIFEST cannot be read, every table is checked (and
// badger's Open reports the MANIFEST).
func verifyTables(dir string, opts badger.Options) (bad string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	sort.Strings(files)
	if listed, ok := manifestTables(dir, opts); ok {
		files = slices.DeleteFunc(files, func(f string) bool {
			id, ok := table.ParseFileID(filepath.Base(f))
			return ok && !listed[id]
		})
	}
	topts := table.Options{BlockSize: opts.BlockSize, Compression: opts.Compression, BloomFalsePositive: opts.BloomFalsePositive}
	for _, f := range files {
		if err := openTable(f, topts, options.NoVerification); err != nil {
			return fmt.Sprintf("table %s unreadable (truncated or malformed): %v", filepath.Base(f), err)
		}
		// badger's check panics on a mismatch (see BadgerOptions): any failure is one.
		if err := openTable(f, topts, options.OnTableRead); err != nil {
			return fmt.Sprintf("table %s: a block's checksum does not match its data", filepath.Base(f))
		}
	}
	return ""
}

// manifestTables is the set of table ids dir's MANIFEST lists; ok is false when it cannot
// be read whole.
func manifestTables(dir string, opts badger.Options) (ids map[uint64]bool, ok bool) {
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false
	}
	m, end, err := replayManifest(f, opts)
	if err != nil || end != fi.Size() {
		return nil, false
	}
	ids = make(map[uint64]bool, len(m.Tables))
	for id := range m.Tables {
		ids[id] = true
	}
	return ids, true
}

// replayManifest is badger.ReplayManifestFile with a panic (a malformed entry) turned into an
// error.
func replayManifest(f *os.File, opts badger.Options) (m badger.Manifest, end int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(p)
		}
	}()
	return badger.ReplayManifestFile(f, opts.ExternalMagicVersion, opts)
}

// openTable opens one table read-only with chk and closes it; a panic is an error.
func openTable(path string, topts table.Options, chk options.ChecksumVerificationMode) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil && !errors.Is(err, z.NewFile) {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = panicError(p)
		}
		mf.Close(-1)
	}()
	topts.ChkMode = chk
	_, err = table.OpenTable(mf, topts)
	if err != nil {
		return errors.New(oneLine(err.Error()))
	}
	return nil
}

// openBadger is badger.Open with a panic on a malformed file (a truncated table) turned
// into an error. In memory every record stays in the tree, whatever threshold the options
// set: badger v4.9.6 keeps no value log there, yet indexes a value-log pointer it never
// wrote for a value above the threshold (an index-out-of-range panic in its writer).
func openBadger(opts badger.Options) (db *badger.DB, err error) {
	if opts.InMemory {
		opts = opts.WithValueThreshold(maxValueThreshold)
	}
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, panicError(p)
		}
	}()
	return badger.Open(opts)
}

// isDamage reports whether badger's Open error is about damaged files, rather than, say, a
// directory another process holds.
func isDamage(err error) bool {
	s := strings.ToLower(err.Error())
	for _, w := range []string{"panicked", "checksum", "manifest", "truncat", "corrupt", "magic"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// oneLine is s with every run of white space, newlines included, made one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// countAll counts every record of db (Open's exact count), with a panic of badger on a
// damaged block turned into an error.
func countAll(db *badger.DB) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(p)
		}
	}()
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if len(it.Item().Key()) >= tokenLen {
				n++
			}
		}
		return nil
	})
	return n, err
}

// writeMarks writes the sidecar's marks when they changed (every second, see Open).
func (s *Store) writeMarks() {
	s.marks.set(s.keys.Load(), s.maxTS.Load())
	if err := s.marks.flush(); err != nil {
		s.logger.Warn("store marks", "err", err)
	}
}

// raiseTS records ts as applied (the sidecar's MaxTS).
func (s *Store) raiseTS(ts uint64) {
	for {
		cur := s.maxTS.Load()
		if ts <= cur || s.maxTS.CompareAndSwap(cur, ts) {
			return
		}
	}
}

// Damage says what Open found damaged when the store was opened with Config.Recover (at this
// start or an earlier one), while spans are marked damaged (see ClearDamaged); "" when the
// data is whole. A damaged store may miss acknowledged writes until repaired.
func (s *Store) Damage() string {
	s.dmg.mu.RLock()
	defer s.dmg.mu.RUnlock()
	return s.dmg.reason
}
