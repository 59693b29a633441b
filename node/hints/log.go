// Package hints keeps what a coordinator owes the replicas that missed writes (hinted
// handoff): a durable queue per peer in a badger database of its own (Log). The handoff
// itself, which reads the queue and hands hints over, is the coordinator's (node/replica).
package hints

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"ringkv/node/store"
)

// Log is the durable queue of hinted handoff: per peer, the records a coordinator owes a
// replica that missed them, oldest first. Safe for concurrent use.
//
// # Where hints live
//
// In a badger database of their own, Dir ("hints") under the store's directory, not in
// the store's. A store key is an 8-byte ring token followed by the user key, so every byte
// string of 8 bytes or more is some token's key: a hint under any prefix of the store's key
// space would fall inside some vnode's range and show in Scan, CountRange, KeyCount,
// DeleteRange, range streaming and the trees a repair builds from scans, unless every one of
// them learned to skip it. A second key layout for data (a one-byte prefix) would need a
// migration of every existing data directory and touch the hot path of every read and write.
// A separate database shares nothing with the data but the volume: no scan of the store can
// see a hint, existing data directories open unchanged (the subdirectory is created on first
// use), the store's files, marks and damage checks are untouched, and badger's own files for
// hints (memtable, value log) are sized for a small queue rather than for the data.
//
// # Layout
//
// A key is 'q', the peer's length (one byte), the peer, and an 8-byte big-endian sequence
// number, global to the database and increasing: a peer's hints are one contiguous key range
// in the order they were added. A value is the write time (8 bytes, Unix nanoseconds,
// big-endian), the user key's length (uvarint), the user key, then the Record in its codec.
// The key "format" holds hintsFormat; a database with another format is refused.
//
// # Durability
//
// Like the store's records (see the package comment): Add returns after badger has written
// the hint to its write-ahead log through the OS, so a hint survives a crash of the process
// (kill -9); with SyncWrites (--sync-writes) Add fsyncs first, and a hint survives power loss
// like the data does.
//
// # Bounds
//
// MaxBytes bounds the bytes held (key and value as stored): an Add over it drops the oldest
// hints of the peer with the most bytes. MaxAge bounds a hint's age: Expire drops older ones.
// Both count what they drop (Dropped); repair restores the writes they carried. While the
// store's volume is full (Writable) Add stores nothing and counts the hint as dropped.
type Log struct {
	db     *badger.DB
	cfg    Config
	now    func() time.Time
	lastGC time.Time // guarded by rm

	// life is held shared by every use of db and exclusively by Close: badger panics on an
	// iterator of a closed database.
	life sync.RWMutex

	mu     sync.Mutex
	seq    uint64 // last sequence number handed out
	peers  map[string]*peerCounts
	bytes  int64
	closed bool

	// rm serializes removals (Remove, Expire, the byte bound), which look a hint up before
	// they delete it, so that a hint is counted out once.
	rm sync.Mutex

	// tablesLost: Open found tables on disk and an empty database (a lost or truncated
	// MANIFEST), for Open's log line.
	tablesLost bool
}

// peerCounts is the counters of one peer's queue.
type peerCounts struct {
	count, bytes               int64
	oldest                     time.Time // write time of the front hint; zero = look it up
	queued, delivered, dropped uint64    // since Open
}

// Dir is the hints database's directory under the store's.
const Dir = "hints"

// hintsFormat is the layout version kept under formatKey.
const hintsFormat = "1"

var formatKey = []byte("format")

// Config configures Hints.
type Config struct {
	// Dir is the hints database's directory (store dir/Dir: Path). Ignored InMemory.
	Dir string
	// InMemory keeps the hints in memory: nothing survives Close.
	InMemory bool
	// SyncWrites fsyncs every Add before it returns, as the store does with it.
	SyncWrites bool
	// MaxBytes bounds the bytes held; 0 = unbounded.
	MaxBytes int64
	// MaxAge bounds a hint's age (Expire); 0 = unbounded.
	MaxAge time.Duration
	// Writable, when set, is asked before every Add (Store.DiskFull): an error stores nothing.
	Writable func() error
	// Now is the clock of write times; nil = time.Now.
	Now func() time.Time
	// Logger receives badger's warnings; nil = slog.Default().
	Logger *slog.Logger
	// Badger, if set, adjusts the badger options after the log has set its own
	// (Store.FitBadger: sizes fitted to the data volume's reserve, which the hints share).
	Badger func(badger.Options) badger.Options
}

// Hint is one record owed to a peer.
type Hint struct {
	Peer   string
	Key    []byte
	Record store.Record
	// Written is when the hint was added.
	Written time.Time

	seq  uint64
	size int64
}

// Queue is one peer's queue, for NodeInfo and metrics.
type Queue struct {
	Peer  string
	Count uint64
	Bytes uint64
	// Oldest is the write time of the oldest hint (zero when none).
	Oldest time.Time
	// Queued, Delivered and Dropped count hints since Open: added, removed as handed over,
	// dropped by a bound.
	Queued, Delivered, Dropped uint64
}

// Open opens (or creates) the hints database of cfg and counts what it holds.
func Open(cfg Config) (*Log, error) {
	if !cfg.InMemory && cfg.Dir == "" {
		return nil, fmt.Errorf("%w: hints dir is empty and in-memory is off", ErrInvalidConfig)
	}
	if cfg.MaxBytes < 0 || cfg.MaxAge < 0 {
		return nil, fmt.Errorf("%w: hint bounds %d bytes / %v are negative", ErrInvalidConfig, cfg.MaxBytes, cfg.MaxAge)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", "hints")
	if !cfg.InMemory {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("open hints %q: %w", cfg.Dir, err)
		}
	}
	opts := store.BadgerOptions(cfg.Dir, cfg.InMemory, cfg.SyncWrites, logger).
		// A queue of a few MiB to MaxBytes, mostly written, read once and deleted: small
		// memtables and caches, so a second badger costs little memory.
		WithMemTableSize(8 << 20).
		WithValueThreshold(64 << 10).
		WithNumMemtables(2).
		WithBlockCacheSize(4 << 20).
		WithIndexCacheSize(0).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2)
	if cfg.Badger != nil {
		opts = cfg.Badger(opts)
	}
	// Damaged hints never keep a node from starting (no --recover needed, unlike the store):
	// every write a hint holds is also on the replicas that acknowledged it, so losing hints
	// loses no acknowledged write, only the fast way to the replica that missed it.
	var h *Log
	a, err := store.OpenAside("hints", opts, func(db *badger.DB, hadTables bool) error {
		h = &Log{db: db, cfg: cfg, now: cfg.Now, peers: map[string]*peerCounts{}}
		if h.now == nil {
			h.now = time.Now
		}
		return h.load(hadTables)
	})
	if err != nil {
		return nil, err
	}
	if a.Damage != "" {
		logger.Error(hintsLost, "damage", a.Damage, "moved_to", a.MovedTo)
	}
	if h.tablesLost {
		logger.Error(hintsLost, "damage", "MANIFEST lost or truncated: badger opened the database empty and dropped the tables it no longer named")
	}
	return h, nil
}

// hintsLost is the log line of a hints database found damaged at Open.
const hintsLost = "hints database damaged, opened empty: the writes its hints held reach the replicas that missed them by repair only (kvctl repair, or background repair within --repair-interval)"

// load checks the format and counts every peer's hints. hadTables: the directory held
// tables before badger opened it, so an empty database lost them (tablesLost).
func (h *Log) load(hadTables bool) error {
	empty := true
	err := h.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			if bytes.Equal(k, formatKey) {
				v, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				if string(v) != hintsFormat {
					return fmt.Errorf("hints format %q, this kvnode reads %q: move the directory aside (repair restores what it held)", v, hintsFormat)
				}
				empty = false
				continue
			}
			peer, seq, ok := splitHintKey(k)
			if !ok {
				return fmt.Errorf("unknown key %x in the hints database", k)
			}
			empty = false
			p := h.peer(peer)
			p.count++
			p.bytes += itemSize(item)
			h.bytes += itemSize(item)
			h.seq = max(h.seq, seq)
		}
		return nil
	})
	if err != nil {
		return err
	}
	h.tablesLost = empty && hadTables
	if empty {
		return h.db.Update(func(txn *badger.Txn) error { return txn.Set(formatKey, []byte(hintsFormat)) })
	}
	return nil
}

// peer is p's counters, created when missing. Callers hold mu (or own h, in load).
func (h *Log) peer(id string) *peerCounts {
	p := h.peers[id]
	if p == nil {
		p = &peerCounts{}
		h.peers[id] = p
	}
	return p
}

// hintKey is the key of peer's hint seq.
func hintKey(peer string, seq uint64) []byte {
	k := make([]byte, 0, 2+len(peer)+8)
	k = append(k, 'q', byte(len(peer)))
	k = append(k, peer...)
	return binary.BigEndian.AppendUint64(k, seq)
}

// hintPrefix is the prefix of every key of peer's hints.
func hintPrefix(peer string) []byte {
	return append([]byte{'q', byte(len(peer))}, peer...)
}

func splitHintKey(k []byte) (peer string, seq uint64, ok bool) {
	if len(k) < 2 || k[0] != 'q' || len(k) != 2+int(k[1])+8 {
		return "", 0, false
	}
	n := int(k[1])
	return string(k[2 : 2+n]), binary.BigEndian.Uint64(k[2+n:]), true
}

func encodeHint(written time.Time, key []byte, rec store.Record) ([]byte, error) {
	b := make([]byte, 8, 8+binary.MaxVarintLen32+len(key)+store.RecordHeaderLen+len(rec.Value))
	binary.BigEndian.PutUint64(b, uint64(written.UnixNano()))
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return rec.AppendBinary(b)
}

func decodeHint(v []byte, h *Hint) error {
	if len(v) < 8 {
		return fmt.Errorf("decode hint: %w: %d bytes", store.ErrShortRecord, len(v))
	}
	h.Written = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
	n, w := binary.Uvarint(v[8:])
	if w <= 0 || uint64(len(v)-8-w) < n {
		return fmt.Errorf("decode hint: %w: bad key length", store.ErrShortRecord)
	}
	h.Key = bytes.Clone(v[8+w : 8+w+int(n)])
	return h.Record.UnmarshalBinary(v[8+w+int(n):])
}

// Add stores a hint of rec for peer and returns once it is durable (see Durability). Over
// MaxBytes it then drops the oldest hints of the peer with the most bytes. While the volume
// is full it stores nothing, counts the hint as dropped and returns the error.
func (h *Log) Add(peer string, key []byte, rec store.Record) error {
	if len(peer) == 0 || len(peer) > 255 {
		return fmt.Errorf("%w: hint peer %q", ErrInvalidConfig, peer)
	}
	now := h.now()
	v, err := encodeHint(now, key, rec)
	if err != nil {
		return fmt.Errorf("add hint: %w", err)
	}
	if !h.use() {
		return ErrClosed
	}
	h.mu.Lock()
	h.seq++
	seq := h.seq
	h.mu.Unlock()
	k := hintKey(peer, seq)
	err = nil
	if h.cfg.Writable != nil {
		err = h.cfg.Writable()
	}
	if err == nil {
		err = h.db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) })
	}
	h.life.RUnlock()
	if err != nil {
		h.mu.Lock()
		h.peer(peer).dropped++
		h.mu.Unlock()
		return fmt.Errorf("add hint: %w", err)
	}
	size := int64(len(k) + len(v))
	h.mu.Lock()
	p := h.peer(peer)
	p.count++
	p.bytes += size
	p.queued++
	if p.count == 1 {
		p.oldest = now
	}
	h.bytes += size
	over := h.cfg.MaxBytes > 0 && h.bytes > h.cfg.MaxBytes
	h.mu.Unlock()
	if over {
		return h.shrink()
	}
	return nil
}

// itemSize is a hint's size as Add counts it: key and value.
func itemSize(item *badger.Item) int64 { return item.KeySize() + item.ValueSize() }

// use holds life shared for a use of db; false after Close.
func (h *Log) use() bool {
	h.life.RLock()
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		h.life.RUnlock()
		return false
	}
	return true
}

// shrink drops the oldest hints of the peer with the most bytes until the total is within
// MaxBytes.
func (h *Log) shrink() error {
	for {
		h.mu.Lock()
		if h.bytes <= h.cfg.MaxBytes {
			h.mu.Unlock()
			return nil
		}
		var big string
		var most int64
		for id, p := range h.peers {
			if p.bytes > most {
				big, most = id, p.bytes
			}
		}
		h.mu.Unlock()
		if big == "" {
			return nil
		}
		hs, err := h.Next(big, 16)
		if err != nil {
			return err
		}
		if len(hs) == 0 {
			return nil
		}
		// Drop just enough of them.
		h.mu.Lock()
		excess := h.bytes - h.cfg.MaxBytes
		h.mu.Unlock()
		n := 0
		for n < len(hs) && excess > 0 {
			excess -= hs[n].size
			n++
		}
		if _, err := h.remove(hs[:n], true); err != nil {
			return err
		}
	}
}

// Peers returns the peers with hints, sorted.
func (h *Log) Peers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for id, p := range h.peers {
		if p.count > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Next returns up to n of peer's oldest hints, in the order they were added, without
// removing them: Remove them once the peer has taken them.
func (h *Log) Next(peer string, n int) ([]Hint, error) {
	if !h.use() {
		return nil, ErrClosed
	}
	defer h.life.RUnlock()
	var out []Hint
	prefix := hintPrefix(peer)
	err := h.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: n})
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix) && len(out) < n; it.Next() {
			item := it.Item()
			_, seq, ok := splitHintKey(item.Key())
			if !ok {
				continue
			}
			hint := Hint{Peer: peer, seq: seq, size: itemSize(item)}
			if err := item.Value(func(v []byte) error { return decodeHint(v, &hint) }); err != nil {
				return fmt.Errorf("hint %x: %w", item.Key(), err)
			}
			out = append(out, hint)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("next hints for %s: %w", peer, err)
	}
	return out, nil
}

// Remove deletes hints the peer has taken (or that were written elsewhere), counting them
// as delivered. A hint removed already is skipped.
func (h *Log) Remove(hs []Hint) error {
	_, err := h.remove(hs, false)
	return err
}

// Drop deletes hints that can never be handed over (the peer refuses the record itself),
// counting them as dropped.
func (h *Log) Drop(hs []Hint) error {
	_, err := h.remove(hs, true)
	return err
}

// remove deletes those of hs still present and counts them, as dropped or delivered.
func (h *Log) remove(hs []Hint, dropped bool) (int, error) {
	if len(hs) == 0 {
		return 0, nil
	}
	if !h.use() {
		return 0, ErrClosed
	}
	defer h.life.RUnlock()
	h.rm.Lock()
	defer h.rm.Unlock()
	var gone []Hint
	err := h.db.Update(func(txn *badger.Txn) error {
		for _, x := range hs {
			k := hintKey(x.Peer, x.seq)
			if _, err := txn.Get(k); errors.Is(err, badger.ErrKeyNotFound) {
				continue
			} else if err != nil {
				return err
			}
			if err := txn.Delete(k); err != nil {
				return err
			}
			gone = append(gone, x)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("remove hints: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range gone {
		p := h.peer(x.Peer)
		p.count--
		p.bytes -= x.size
		h.bytes -= x.size
		p.oldest = time.Time{}
		if dropped {
			p.dropped++
		} else {
			p.delivered++
		}
	}
	return len(gone), nil
}

// hintGCInterval is how often Expire also runs badger's value-log GC.
const hintGCInterval = time.Minute

// Expire drops the hints older than MaxAge and returns how many it dropped.
func (h *Log) Expire() (int, error) {
	if h.use() {
		h.rm.Lock()
		if t := h.now(); t.Sub(h.lastGC) >= hintGCInterval && !h.cfg.InMemory {
			h.lastGC = t
			_ = h.db.RunValueLogGC(0.5) // most hints live in the LSM tree; nothing to do is fine
		}
		h.rm.Unlock()
		h.life.RUnlock()
	}
	if h.cfg.MaxAge <= 0 {
		return 0, nil
	}
	cut := h.now().Add(-h.cfg.MaxAge)
	total := 0
	for _, peer := range h.Peers() {
		// The front hint first: most rounds find nothing to expire, and read one hint a peer.
		for batch := 1; ; batch = 256 {
			hs, err := h.Next(peer, batch)
			if err != nil {
				return total, err
			}
			n := 0
			for n < len(hs) && hs[n].Written.Before(cut) {
				n++
			}
			d, err := h.remove(hs[:n], true)
			total += d
			if err != nil {
				return total, err
			}
			if n < len(hs) || n == 0 {
				break
			}
		}
	}
	return total, nil
}

// Queues returns every peer's queue that holds hints or has counted any since Open, sorted
// by peer.
func (h *Log) Queues() []Queue {
	h.mu.Lock()
	var out []Queue
	var look []int
	for id, p := range h.peers {
		q := Queue{Peer: id, Count: uint64(max(p.count, 0)), Bytes: uint64(max(p.bytes, 0)), Oldest: p.oldest,
			Queued: p.queued, Delivered: p.delivered, Dropped: p.dropped}
		if q.Count == 0 {
			q.Oldest = time.Time{}
		} else if q.Oldest.IsZero() {
			look = append(look, len(out))
		}
		out = append(out, q)
	}
	h.mu.Unlock()
	for _, i := range look {
		if hs, err := h.Next(out[i].Peer, 1); err == nil && len(hs) == 1 {
			out[i].Oldest = hs[0].Written
			h.mu.Lock()
			if p := h.peers[out[i].Peer]; p.count > 0 && p.oldest.IsZero() {
				p.oldest = hs[0].Written
			}
			h.mu.Unlock()
		}
	}
	slices.SortFunc(out, func(a, b Queue) int { return cmp.Compare(a.Peer, b.Peer) })
	return out
}

// Dropped is the hints dropped since Open, every peer together.
func (h *Log) Dropped() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n uint64
	for _, p := range h.peers {
		n += p.dropped
	}
	return n
}

// Bytes is the bytes held, every peer together.
func (h *Log) Bytes() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bytes
}

// Close closes the database; hints on disk stay for the next Open.
func (h *Log) Close() error {
	h.life.Lock()
	defer h.life.Unlock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	h.closed = true
	h.mu.Unlock()
	if err := h.db.Close(); err != nil {
		return fmt.Errorf("close hints: %w", err)
	}
	return nil
}

// Path is the hints directory of the store directory dir.
func Path(dir string) string { return filepath.Join(dir, Dir) }
