package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	bits64 "math/bits"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/badger/v4"
)

// stripes is the number of per-key locks Apply hashes keys onto; a power of two.
const stripes = 1024

// stripeOf is the stripe of store key sk: the index of its lock (Store.locks) and of its
// stamps (stamps.shards).
func stripeOf(sk []byte) uint32 { return uint32(xxhash.Sum64(sk) & (stripes - 1)) }

// deleteBatchKeys bounds how many store keys DeleteRange collects per read
// transaction before handing them to a write batch.
const deleteBatchKeys = 10_000

// Store is a node's badger database of token-ordered records. It is safe for
// concurrent use; Close must not race with other calls.
type Store struct {
	// db is replaced once, by reopen, when a store opened read-only on a full disk gets
	// room: every use holds dbMu shared (before any stripe lock), reopen exclusively.
	dbMu     sync.RWMutex
	db       *badger.DB
	readOnly atomic.Bool
	cfg      Config
	logger   *slog.Logger
	closed   atomic.Bool

	// locks serialize Apply per key (by a hash of the store key), which makes
	// its read-compare-write atomic without badger's conflict detection.
	locks [stripes]sync.Mutex

	// group gathers concurrent Apply calls into one commit (see Apply).
	group groupCommit

	// keys estimates the number of stored records, tombstones included: an
	// exact count at Open, then +1 for every Apply that creates a key and -n
	// for every DeleteRange. It drifts only when DeleteRange races with
	// Apply on the same range.
	keys atomic.Int64

	// disk watches the data volume's free space; nil in memory or without a reserve.
	disk *disk
	// memtable is badger's memtable size, fitted to the reserve.
	memtable int64

	stopGC   chan struct{}
	gcDone   chan struct{}
	diskDone chan struct{}
	syncDone chan struct{}
	// syncFailing is whether the last periodic sync failed (syncLogs warns once a failure).
	syncFailing bool

	// dmg is the set of token spans marked damaged and why (see marked.go).
	dmg damaged
	// marks keeps the sidecar of high-water marks (see damage.go); nil in memory.
	marks     *marker
	maxTS     atomic.Uint64
	marksDone chan struct{}

	// points are the range moves' resume points (see points.go).
	points *movePoints

	// stamps remembers recent keys' newest stamps for newer (see stamps.go).
	stamps stamps

	// stopCommitter ends the committer goroutine (groupCommit.committer), which closes
	// committerDone.
	stopCommitter chan struct{}
	committerDone chan struct{}
}

// Open validates cfg, opens badger and starts the value-log GC goroutine.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", "store")
	opts := cfg.badgerOptions(logger)
	if !cfg.InMemory {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("open %q: %w", cfg.Dir, err)
		}
	}
	var d *disk
	if !cfg.InMemory && cfg.MinFreeDisk != (Reserve{}) {
		// The volume is looked at before badger opens: on a full disk the store opens
		// read-only (writes refused), and badger's sizes are fitted to the reserve.
		var err error
		if d, err = newDisk(cfg.Dir, cfg.MinFreeDisk, logger.Warn); err != nil {
			return nil, err
		}
		opts = fitReserve(opts, d.need.Load())
		if err := d.err(); err != nil {
			_, serr := os.Stat(filepath.Join(cfg.Dir, "MANIFEST"))
			if serr == nil && !d.room(uint64(2*opts.MemTableSize)) {
				// Read-only badger replays its logs into memory and neither flushes nor
				// compacts: nothing is written into space the volume does not have.
				logger.Warn("opening on a full disk: read-only until space is freed", "err", err)
				opts = opts.WithReadOnly(true)
			} else {
				// With room for badger's flushes of the logs it replays (the ballast given
				// up for them if need be) it opens for writing, and writes are refused all
				// the same until space is freed: a read-only open cannot replay a log left by
				// a crash (it would have to truncate it), nor open a new store (no MANIFEST).
				logger.Warn("opening on a full disk: writes refused until space is freed", "err", err)
			}
		}
	}
	db, n, mk, damage, err := openChecked(cfg, opts, logger)
	if err != nil {
		return nil, err
	}
	pointsDir := cfg.Dir
	if cfg.InMemory {
		pointsDir = ""
	}
	// A store opened damaged may lack records a point says are here: its moves start over.
	points, err := openPoints(pointsDir, damage == "")
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{
		db:        db,
		cfg:       cfg,
		logger:    logger,
		disk:      d,
		memtable:  opts.MemTableSize,
		stopGC:    make(chan struct{}),
		gcDone:    make(chan struct{}),
		diskDone:  make(chan struct{}),
		syncDone:  make(chan struct{}),
		marksDone: make(chan struct{}),
		points:    points,

		stopCommitter: make(chan struct{}),
		committerDone: make(chan struct{}),
	}
	s.stamps.init(cfg.StampBytes)
	s.group.kick = make(chan struct{}, 1)
	go s.group.committer(s, s.stopCommitter, s.committerDone)
	s.readOnly.Store(opts.ReadOnly)
	s.keys.Store(n)
	s.dmg.init(mk.Damaged, damage, mk.Unrepairable)
	if !cfg.InMemory {
		s.marks = &marker{dir: cfg.Dir, m: mk, dirty: true}
		s.marks.set(n, 0)
		if err := s.marks.flush(); err != nil {
			logger.Warn("store marks", "err", err)
		}
		go s.every(time.Second, s.marksDone, s.writeMarks)
	} else {
		close(s.marksDone)
	}
	if cfg.InMemory || cfg.ValueLogGCInterval == 0 {
		close(s.gcDone)
	} else {
		go s.every(cfg.ValueLogGCInterval, s.gcDone, func() { s.runGC(cfg.ValueLogGCDiscardRatio) })
	}
	if cfg.InMemory || cfg.SyncWrites || cfg.SyncInterval == 0 {
		close(s.syncDone)
	} else {
		go s.every(cfg.SyncInterval, s.syncDone, s.syncLogs)
	}
	if d == nil {
		close(s.diskDone)
	} else {
		interval := cfg.DiskCheckInterval
		if interval <= 0 {
			interval = 500 * time.Millisecond
		}
		go s.every(interval, s.diskDone, s.watch)
	}
	return s, nil
}

// every calls fn every interval until Close (stopGC), then closes done.
func (s *Store) every(interval time.Duration, done chan struct{}, fn func()) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stopGC:
			return
		case <-t.C:
		}
		fn()
	}
}

// syncLogs writes badger's write-ahead and value logs to disk (badger.DB.Sync, an msync of
// the current files' maps), every SyncInterval. Besides bounding what a machine crash loses,
// it keeps the dirty pages of the value log few: badger writes the current value-log file
// back in full (msync) in its one write goroutine when it rotates the file, so every write
// of the node waited on up to a whole file's write-back (0.5–0.76 s with 4 KiB values,
// docs/bench.md, session 17). Badger's Sync does not hold up its writer while it runs.
func (s *Store) syncLogs() {
	if s.disk.err() != nil || s.readOnly.Load() {
		return
	}
	s.dbMu.RLock()
	err := s.db.Sync()
	s.dbMu.RUnlock()
	if err != nil && !s.syncFailing {
		s.logger.Warn("sync badger's logs", "err", err)
	}
	s.syncFailing = err != nil
}

// runGC runs badger's value-log GC once: one call rewrites at most one file, so it repeats
// while it finds garbage, until Close.
func (s *Store) runGC(ratio float64) {
	if s.disk.err() != nil || s.readOnly.Load() {
		return // a rewrite needs room the reserve keeps for badger's own writes
	}
	for {
		s.dbMu.RLock()
		err := s.db.RunValueLogGC(ratio)
		s.dbMu.RUnlock()
		if err != nil {
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				s.logger.Warn("value-log GC", "err", err)
			}
			return
		}
		select {
		case <-s.stopGC:
			return
		default:
		}
	}
}

// Get returns the record stored for key at token; found is false when there
// is none. A tombstone is returned as found, with Tombstone set.
func (s *Store) Get(token uint64, key []byte) (rec Record, found bool, err error) {
	if s.closed.Load() {
		return Record{}, false, ErrClosed
	}
	sk := StoreKey(token, key)
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(sk)
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		return rec.decode(v)
	})
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return Record{}, false, nil
	case err != nil:
		return Record{}, false, fmt.Errorf("get %x: %w", sk, err)
	}
	return rec, true, nil
}

// Apply stores rec for key at token unless the stored record is newer or
// equal (Record.Newer); applied reports whether rec was written. The
// compare-and-write is atomic per key.
//
// Group commit: concurrent Apply calls are gathered into one badger
// transaction (see groupCommit): the caller that finds no commit running
// leads, the others queue behind the running commit and the next group is
// whatever queued meanwhile, so nobody waits for a timer and a lone Apply
// commits at once. With SyncWrites one fsync covers the group, and no Apply
// returns before the commit (and its fsync) that wrote it.
//
// Concurrency: a group reads, compares and writes its keys in one
// transaction under the keys' stripe locks (1024 stripes by xxhash of the
// store key, taken in stripe order), and only one group commits at a time,
// so no other writer of a key (another group, ApplyBatch) interleaves
// between the read and the write. A key twice in a group is compared with
// the group's earlier write (the transaction reads its own pending writes).
// Badger's optimistic conflict detection was rejected: it retries unboundedly
// when many replicas' writes to one hot key arrive together, and costs
// bookkeeping on every commit; the locks let badger run with DetectConflicts off.
func (s *Store) Apply(token uint64, key []byte, rec Record) (applied bool, err error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	w, err := s.encodeWrite(token, key, rec)
	if err != nil {
		return false, err
	}
	sk := w.sk
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	c := callPool.Get().(*applyCall)
	c.one[0] = w
	c.ws = c.one[:]
	s.group.run(s, c)
	applied, err = c.one[0].applied, c.one[0].err
	c.one[0], c.ws = write{}, nil
	callPool.Put(c)
	if err != nil {
		return false, fmt.Errorf("apply %x: %w", sk, err)
	}
	return applied, nil
}

// ApplyAsync is Apply without a goroutine waiting for the commit: the write joins the group
// commit like an Apply's, and done gets Apply's result once its commit has ended. done runs
// once, in the goroutine that ends the commit (the store's committer, or the caller of an
// Apply that leads the group), so it must not block; it runs before ApplyAsync returns when
// the write fails before the commit (a closed store, a full disk). A write of this node's own
// replica costs no goroutine of its own this way, and a slow commit (a disk, an fsync) does
// not hold up its caller.
func (s *Store) ApplyAsync(token uint64, key []byte, rec Record, done func(applied bool, err error)) {
	if s.closed.Load() {
		done(false, ErrClosed)
		return
	}
	w, err := s.encodeWrite(token, key, rec)
	if err != nil {
		done(false, err)
		return
	}
	// Held shared until the commit has ended (finishAsync): Close and reopen wait for it.
	s.dbMu.RLock()
	if s.closed.Load() {
		s.dbMu.RUnlock()
		done(false, ErrClosed)
		return
	}
	c := callPool.Get().(*applyCall)
	c.one[0] = w
	c.ws = c.one[:]
	c.async = done
	s.group.runAsync(c)
}

// encodeWrite is the write of an Apply or an ApplyAsync: one allocation holds the store key
// and the encoded record (badger keeps both); the error is the record's encoding or a full
// disk (writable).
func (s *Store) encodeWrite(token uint64, key []byte, rec Record) (write, error) {
	sk := StoreKey(token, key)
	buf := make([]byte, 0, len(sk)+headerLen+len(rec.Value))
	buf = append(buf, sk...)
	buf, err := rec.AppendBinary(buf)
	if err != nil {
		return write{}, fmt.Errorf("apply %x: %w", sk, err)
	}
	sk, val := buf[:len(sk):len(sk)], buf[len(sk):]
	if err := s.writable(len(sk) + len(val)); err != nil {
		return write{}, err
	}
	return write{sk: sk, val: val, rec: rec}, nil
}

// finishAsync hands an ApplyAsync call its outcome, where its commit ended.
func (s *Store) finishAsync(c *applyCall) {
	w, done := c.one[0], c.async
	c.one[0], c.ws, c.async = write{}, nil, nil
	callPool.Put(c)
	s.dbMu.RUnlock()
	if w.err != nil {
		done(false, fmt.Errorf("apply %x: %w", w.sk, w.err))
		return
	}
	done(w.applied, nil)
}

// Outcome is what ApplyMany did with one entry: written (Applied), held back because the
// store holds a version at least as new (neither), or failed (Err).
type Outcome struct {
	Applied bool
	Err     error
}

// ApplyMany applies each entry as Apply would — last-write-wins per key, in the group commit
// with the Apply calls queued beside it — and sets out[i] to entry i's outcome (out must be
// as long as entries). The entries travel as one unit through the group commit: one caller
// waits for one commit, however many entries it brings, so a batch of replica writes costs
// one wake-up, not one per write. A key twice among the entries is compared with the earlier.
func (s *Store) ApplyMany(entries []Entry, out []Outcome) {
	fail := func(err error) {
		for i := range out {
			out[i] = Outcome{Err: err}
		}
	}
	if s.closed.Load() {
		fail(ErrClosed)
		return
	}
	need := 0
	for _, e := range entries {
		need += tokenLen + len(e.Key) + headerLen + len(e.Record.Value)
	}
	if err := s.writable(need); err != nil {
		fail(err)
		return
	}
	// One allocation holds the entries' store keys and encoded records; badger keeps them.
	buf := make([]byte, 0, need)
	c := callPool.Get().(*applyCall)
	ws := c.many[:0]
	for _, e := range entries {
		at := len(buf)
		buf = appendStoreKey(buf, e.Token, e.Key)
		mid := len(buf)
		var err error
		if buf, err = e.Record.AppendBinary(buf); err != nil {
			// Not in the commit: a write with err set is skipped by commit.
			ws = append(ws, write{err: err})
			buf = buf[:at]
			continue
		}
		ws = append(ws, write{sk: buf[at:mid:mid], val: buf[mid:len(buf):len(buf)], rec: e.Record})
	}
	c.ws = ws
	s.dbMu.RLock()
	s.group.run(s, c)
	s.dbMu.RUnlock()
	for i := range ws {
		out[i] = Outcome{Applied: ws[i].applied}
		if err := ws[i].err; err != nil {
			out[i].Err = fmt.Errorf("apply %x: %w", ws[i].sk, err)
		}
	}
	clear(ws)
	c.many, c.ws = ws[:0], nil
	callPool.Put(c)
}

// maxGroup bounds how many writes one group commit takes (beyond its leader's own): badger refuses a
// transaction larger than a share of its memtable (ErrTxnTooBig), and a bounded
// group bounds the stripe locks it holds.
const maxGroup = 1024

// write is one record of a commit: its store key and encoding, and the outcome.
type write struct {
	sk, val []byte
	rec     Record
	applied bool
	err     error
	stripe  uint32 // the stripe of sk, set by commit
}

// applyCall is one Apply (or ApplyMany) waiting in a group commit: its writes are ws.
type applyCall struct {
	ws   []write
	one  [1]write      // ws of an Apply
	many []write       // ws of an ApplyMany, kept for the next one
	done chan struct{} // cap 1: one send per wait (the outcome, or the lead)
	lead bool          // set before done when the call is to lead the next group
	// async is the callback of an ApplyAsync call, which no goroutine waits for: it gets
	// the outcome through finishAsync instead of done, and the committer leads for it.
	async func(applied bool, err error)
}

var callPool = sync.Pool{New: func() any { return &applyCall{done: make(chan struct{}, 1)} }}

// groupCommit gathers concurrent Apply calls into one badger commit each
// (leader/follower, as in PostgreSQL's and LevelDB's write queues). A call
// queues; if no commit is running it leads: it takes the queue (up to
// maxGroup), commits it, wakes the group's calls with their outcomes and
// hands the lead to the first call still queued. So a group is exactly what
// queued while the previous commit ran, and a call waits only for the commit
// ahead of it. An ApplyAsync call has no goroutine to lead with: the store's
// committer goroutine leads whenever the call to lead is one of those. Its
// fields are guarded by mu; calls and writes belong to the leader.
type groupCommit struct {
	mu    sync.Mutex
	queue []*applyCall
	busy  bool // a leader is committing or handing over; false only with an empty queue

	calls  []*applyCall
	writes []write

	// kick (cap 1) tells the committer to lead: the call to lead is an ApplyAsync one.
	kick chan struct{}
}

// committer leads the groups whose first call is an ApplyAsync one, until stop; then it
// closes done. Store.Close stops it once no ApplyAsync call is left.
func (g *groupCommit) committer(s *Store, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-g.kick:
			for g.commitNext(s) {
			}
		case <-stop:
			return
		}
	}
}

// runAsync queues an ApplyAsync call c; its outcome goes to finishAsync where its commit ends.
func (g *groupCommit) runAsync(c *applyCall) {
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	if lead {
		g.kick <- struct{}{} // cannot block: only a leader kicks, and there is one
	}
}

// run queues c and returns once the commit that covers it is done, with the
// outcomes of c.ws set.
func (g *groupCommit) run(s *Store, c *applyCall) {
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	if !lead {
		<-c.done
		if !c.lead {
			return
		}
		c.lead = false
	}
	if g.commitNext(s) {
		g.kick <- struct{}{}
	}
}

// commitNext is the leader's turn: the leader's call (or, for the committer, an ApplyAsync
// call) is queue[0], so it is in the group it commits. It hands the lead to the next call
// queued, or returns true when that call is an ApplyAsync one: then the committer leads
// next (it goes on; another leader kicks it).
func (g *groupCommit) commitNext(s *Store) (asyncNext bool) {
	g.mu.Lock()
	// Whole calls, up to maxGroup writes (at least the leader's, however many it brings).
	n, total := 0, 0
	for n < len(g.queue) && (n == 0 || total+len(g.queue[n].ws) <= maxGroup) {
		total += len(g.queue[n].ws)
		n++
	}
	calls := append(g.calls[:0], g.queue[:n]...)
	clear(g.queue[copy(g.queue, g.queue[n:]):])
	g.queue = g.queue[:len(g.queue)-n]
	g.mu.Unlock()

	writes := g.writes[:0]
	for _, c := range calls {
		writes = append(writes, c.ws...)
	}
	s.commit(writes)
	i := 0
	for _, c := range calls {
		for j := range c.ws {
			c.ws[j].applied, c.ws[j].err = writes[i].applied, writes[i].err
			i++
		}
	}
	clear(writes) // drop the group's keys and values
	g.writes = writes[:0]
	// calls[0] is the leader itself unless it is an ApplyAsync call; wake the others with
	// their outcomes before handing over, since the next leader reuses calls and writes.
	for i, c := range calls {
		switch {
		case c.async != nil:
			s.finishAsync(c)
		case i > 0:
			c.done <- struct{}{}
		}
	}
	clear(calls)
	g.calls = calls[:0]

	g.mu.Lock()
	var next *applyCall
	if len(g.queue) == 0 {
		g.busy = false
	} else {
		next = g.queue[0]
	}
	g.mu.Unlock()
	switch {
	case next == nil:
		return false
	case next.async != nil:
		return true
	}
	next.lead = true
	next.done <- struct{}{}
	return false
}

// applyBatchKeys bounds how many keys ApplyBatch reads and writes in one badger
// transaction, holding their stripe locks: enough to amortize a commit, few
// enough that a client write rarely waits on a stripe the batch holds.
const applyBatchKeys = 128

// Entry is one record of a batch for ApplyBatch: a key at its ring token.
type Entry struct {
	Token  uint64
	Key    []byte
	Record Record
}

// ApplyBatch applies each entry as Apply would — written only if newer than
// the stored record (last-write-wins, checked per key) — and returns how many
// were written. It reads and writes up to 128 keys per badger transaction, under
// those keys' stripe locks taken in stripe order, so a batch costs a few
// commits instead of one per record. An entry whose key appears twice in a
// batch is compared with the earlier one. On an error, the groups committed
// before it stay applied (every entry is idempotent; retry the batch).
func (s *Store) ApplyBatch(entries []Entry) (applied int, err error) {
	applied, _, err = s.applyBatch(entries)
	return applied, err
}

// ApplyBatchHeld is ApplyBatch that returns, instead of the count written, the bytes (key +
// value) of the entries it did not write because a version at least as new was held: what a
// range pulled again had already brought (or a client's write had, meanwhile).
func (s *Store) ApplyBatchHeld(entries []Entry) (held uint64, err error) {
	_, held, err = s.applyBatch(entries)
	return held, err
}

func (s *Store) applyBatch(entries []Entry) (applied int, held uint64, err error) {
	if s.closed.Load() {
		return 0, 0, ErrClosed
	}
	size := 0
	for _, e := range entries {
		size += len(e.Key) + len(e.Record.Value) + tokenLen + 16
	}
	if err := s.writable(size); err != nil {
		return 0, 0, err
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	writes := make([]write, 0, min(len(entries), applyBatchKeys))
	// One buffer holds a group's store keys and encoded records, reused by the next group:
	// badger has copied them into its log and memtable by the time commit returns.
	var buf []byte
	for len(entries) > 0 {
		n := min(len(entries), applyBatchKeys)
		need := 0
		for _, e := range entries[:n] {
			need += tokenLen + len(e.Key) + headerLen + len(e.Record.Value)
		}
		if cap(buf) < need {
			buf = make([]byte, 0, need)
		}
		buf = buf[:0]
		writes = writes[:0]
		for _, e := range entries[:n] {
			at := len(buf)
			buf = appendStoreKey(buf, e.Token, e.Key)
			mid := len(buf)
			if buf, err = e.Record.AppendBinary(buf); err != nil {
				return applied, held, fmt.Errorf("apply %x: %w", buf[at:mid], err)
			}
			writes = append(writes, write{sk: buf[at:mid:mid], val: buf[mid:len(buf):len(buf)], rec: e.Record})
		}
		s.commit(writes)
		for i, w := range writes {
			if w.err != nil {
				return applied, held, fmt.Errorf("apply %x: %w", w.sk, w.err)
			}
			if w.applied {
				applied++
			} else {
				held += uint64(len(entries[i].Key) + len(entries[i].Record.Value))
			}
		}
		entries = entries[n:]
	}
	return applied, held, nil
}

// commit reads, compares and writes ws in one badger transaction (more if
// badger finds it too big) under their keys' stripe locks, and sets each
// write's applied and err: a write whose read fails fails alone; a failed
// commit fails every write of its transaction. The caller holds dbMu shared.
func (s *Store) commit(ws []write) {
	var held [stripes / 64]uint64 // bitmap of the stripes to lock
	for i := range ws {
		st := stripeOf(ws[i].sk)
		ws[i].stripe = st
		held[st/64] |= 1 << (st % 64)
	}
	// Lock in stripe order, so two commits never wait for each other in a cycle.
	for w, bits := range held {
		for bits != 0 {
			b := bits64.TrailingZeros64(bits)
			bits &^= 1 << b
			s.locks[w*64+b].Lock()
		}
	}
	defer func() {
		for w, bits := range held {
			for bits != 0 {
				b := bits64.TrailingZeros64(bits)
				bits &^= 1 << b
				s.locks[w*64+b].Unlock()
			}
		}
	}()

	txn := s.db.NewTransaction(true)
	from, created := 0, 0 // the writes of txn are ws[from:]
	flush := func(to int) {
		err := txn.Commit()
		if err == nil && s.cfg.SyncWrites && s.cfg.OnSync != nil {
			s.cfg.OnSync(to - from)
		}
		for i := from; i < to; i++ {
			if err != nil {
				// What the failed transaction held is not known: read it from badger again.
				s.stamps.drop(ws[i].stripe, ws[i].sk)
			}
			switch {
			case err != nil && ws[i].err == nil:
				ws[i].applied, ws[i].err = false, err
			case ws[i].applied:
				s.raiseTS(ws[i].rec.TS)
			}
		}
		if err == nil {
			s.keys.Add(int64(created))
		}
		from, created = to, 0
	}
	for i := range ws {
		w := &ws[i]
		if w.err != nil {
			continue // failed before the commit (ApplyMany's encoding)
		}
		newer, isNew, err := s.newer(txn, w)
		if err != nil {
			w.err = err
			continue
		}
		if !newer {
			continue
		}
		err = txn.Set(w.sk, w.val)
		if errors.Is(err, badger.ErrTxnTooBig) && i > from {
			flush(i)
			txn = s.db.NewTransaction(true)
			// The key was read in the committed transaction: read it again in this one.
			if newer, isNew, err = s.newer(txn, w); err == nil && newer {
				err = txn.Set(w.sk, w.val)
			}
			if err == nil && !newer {
				continue
			}
		}
		if err != nil {
			w.err = err
			continue
		}
		w.applied = true
		// Remembered at once, not at the commit: a later write of the same key in this
		// transaction compares with this one.
		s.stamps.put(w.stripe, w.sk, stamp{w.rec.TS, w.rec.Tombstone})
		if isNew {
			created++
		}
	}
	flush(len(ws))
	txn.Discard()
}

// newer reads w's key in txn (its own pending writes included) and reports
// whether w's record wins over the stored one, and whether the key is new. A key whose stamp
// is remembered is decided by the stamp, unless the two records' stamps are the same (then
// their values decide); the caller holds w's stripe lock.
func (s *Store) newer(txn *badger.Txn, w *write) (newer, isNew bool, err error) {
	if st, ok := s.stamps.get(w.stripe, w.sk); ok {
		switch {
		case w.rec.TS != st.ts:
			return w.rec.TS > st.ts, false, nil
		case w.rec.Tombstone != st.tomb:
			return w.rec.Tombstone, false, nil
		}
	}
	item, err := txn.Get(w.sk)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return true, true, nil
	case err != nil:
		return false, false, err
	}
	err = item.Value(func(v []byte) error {
		var cur Record
		if err := cur.decode(v); err != nil {
			return err
		}
		newer = w.rec.Newer(cur)
		return nil
	})
	return newer, false, err
}

// Scan calls fn for every record with a token in (start, end], in ring order
// clockwise from start: by token, then by key. A non-nil after is a store key
// to resume behind (the last storeKey fn saw); it must lie in the range.
// fn gets copies it may keep; an error from fn stops the scan and is
// returned. Scan reads one consistent snapshot and checks ctx between keys.
// A snapshot pins badger's files while it lives, so a long stream should scan
// in chunks: stop fn with an error after a batch, then resume with after.
func (s *Store) Scan(ctx context.Context, start, end uint64, after []byte,
	fn func(storeKey []byte, key []byte, rec Record) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	sp := spans(start, end)
	first := 0
	if after != nil {
		at, _ := SplitStoreKey(after)
		first = -1
		for i, r := range sp {
			if len(after) >= tokenLen && r.contains(at) {
				first = i
				break
			}
		}
		if first < 0 {
			return fmt.Errorf("scan (%d, %d] after %x: %w", start, end, after, ErrAfterOutOfRange)
		}
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	return s.db.View(func(txn *badger.Txn) error {
		// No value prefetch: badger prefetches each value in a goroutine of its own and
		// copies it once more; ValueCopy below reads the value once, in this goroutine.
		it := txn.NewIterator(badger.IteratorOptions{PrefetchSize: 100})
		defer it.Close()
		for i := first; i < len(sp); i++ {
			resume := after
			if i != first {
				resume = nil
			}
			err := iterate(it, sp[i], resume, func(item *badger.Item, token uint64) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				sk := item.KeyCopy(nil)
				v, err := item.ValueCopy(nil)
				if err != nil {
					return fmt.Errorf("read %x: %w", sk, err)
				}
				var rec Record
				if err := rec.decode(v); err != nil {
					return fmt.Errorf("read %x: %w", sk, err)
				}
				return fn(sk, sk[tokenLen:], rec)
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// iterate calls fn for every item of it with a token in r, strictly after
// the store key after if that is non-nil.
func iterate(it *badger.Iterator, r span, after []byte, fn func(item *badger.Item, token uint64) error) error {
	seek := tokenKey(r.lo)
	if after != nil && string(after) >= string(seek) {
		seek = after
	}
	for it.Seek(seek); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if len(k) < tokenLen {
			continue
		}
		token, _ := SplitStoreKey(k)
		if token > r.hi {
			return nil
		}
		if after != nil && string(k) == string(after) {
			continue
		}
		if err := fn(item, token); err != nil {
			return err
		}
	}
	return nil
}

// CountRange counts the records with a token in (start, end], tombstones
// included, and their approximate size in bytes (key plus value as badger
// stores them). It iterates only that key range, reading keys and value
// sizes without fetching values.
func (s *Store) CountRange(start, end uint64) (keys, bytes uint64, err error) {
	if s.closed.Load() {
		return 0, 0, ErrClosed
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{}) // keys only: no value prefetch
		defer it.Close()
		for _, r := range spans(start, end) {
			if err := iterate(it, r, nil, func(item *badger.Item, _ uint64) error {
				keys++
				bytes += uint64(item.KeySize() + item.ValueSize())
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("count (%d, %d]: %w", start, end, err)
	}
	return keys, bytes, nil
}

// DeleteRange deletes every record with a token in (start, end].
//
// It walks only that key range, keys only, and deletes the keys through
// badger write batches, in rounds of up to 10,000 keys. badger.DropPrefix
// was rejected: a token range is not a prefix (it would take up to ~128
// prefixes to cover one), and DropPrefix blocks all writes and compactions
// of the whole database while it runs. A write racing with DeleteRange on
// the same range may survive or be deleted.
func (s *Store) DeleteRange(start, end uint64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.readOnly.Load() {
		return s.writable(0)
	}
	if s.marks != nil {
		// The high-water mark goes down before the keys do: a crash in between leaves more
		// keys than the sidecar says, never fewer.
		n, _, err := s.CountRange(start, end)
		if err != nil {
			return fmt.Errorf("delete (%d, %d]: %w", start, end, err)
		}
		s.marks.set(max(0, s.keys.Load()-int64(n)), 0)
		if err := s.marks.flush(); err != nil {
			return fmt.Errorf("delete (%d, %d]: %w", start, end, err)
		}
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	for _, r := range spans(start, end) {
		var after []byte
		for {
			batch, err := s.collectKeys(r, after, deleteBatchKeys)
			if err != nil {
				return fmt.Errorf("delete (%d, %d]: %w", start, end, err)
			}
			if len(batch) == 0 {
				break
			}
			wb := s.db.NewWriteBatch()
			for _, sk := range batch {
				if err := wb.Delete(sk); err != nil {
					wb.Cancel()
					return fmt.Errorf("delete (%d, %d]: %w", start, end, err)
				}
			}
			err = wb.Flush()
			s.forget(batch)
			if err != nil {
				return fmt.Errorf("delete (%d, %d]: %w", start, end, err)
			}
			s.keys.Add(-int64(len(batch)))
			if len(batch) < deleteBatchKeys {
				break
			}
			after = batch[len(batch)-1]
		}
	}
	return nil
}

// forget drops the stamps of sks, each under its stripe lock. DeleteRange deletes without
// those locks (a write racing with it on the same range may survive or be deleted), so a
// write in between may still be compared with a stamp of a record just deleted: one of the
// outcomes that race has anyway.
func (s *Store) forget(sks [][]byte) {
	for _, sk := range sks {
		stripe := stripeOf(sk)
		s.locks[stripe].Lock()
		s.stamps.drop(stripe, sk)
		s.locks[stripe].Unlock()
	}
}

// collectKeys returns up to limit store keys with tokens in r, after after.
func (s *Store) collectKeys(r span, after []byte, limit int) ([][]byte, error) {
	var out [][]byte
	errFull := errors.New("batch full")
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{}) // keys only: no value prefetch
		defer it.Close()
		return iterate(it, r, after, func(item *badger.Item, _ uint64) error {
			out = append(out, item.KeyCopy(nil))
			if len(out) == limit {
				return errFull
			}
			return nil
		})
	})
	if err != nil && !errors.Is(err, errFull) {
		return nil, err
	}
	return out, nil
}

// KeyCount estimates the number of stored records, tombstones included,
// from a counter kept by the Store (exact at Open; see Store.keys). It
// costs one atomic load. Badger's own per-table KeyCount was rejected: it
// counts every version and deletion marker and misses the memtables.
func (s *Store) KeyCount() int64 {
	return s.keys.Load()
}

// Size returns the sizes of badger's LSM tree and value log in bytes, as
// badger last measured them (it refreshes them once a minute).
func (s *Store) Size() (lsm, vlog int64) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.cfg.InMemory {
		return s.db.Size()
	}
	// badger refreshes its own figures about once a minute; the directory holds few
	// files, so read what they occupy on disk now (allocated blocks: vlog files are sparse).
	entries, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return s.db.Size()
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		n := info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n = min(n, st.Blocks*512)
		}
		switch filepath.Ext(e.Name()) {
		case ".vlog":
			vlog += n
		default:
			lsm += n
		}
	}
	return lsm, vlog
}

// Close stops the value-log GC goroutine and waits for it, then closes
// badger, which flushes the memtables and syncs its files.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	close(s.stopGC)
	<-s.gcDone
	<-s.diskDone
	<-s.syncDone
	<-s.marksDone
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	// Every ApplyAsync holds dbMu shared until its commit has ended: none is left queued.
	close(s.stopCommitter)
	<-s.committerDone
	if s.disk != nil && !s.readOnly.Load() {
		// Badger flushes its memtable at Close into a memory-mapped table: on a volume with no
		// room that is a SIGBUS. A look now deletes the ballast when the volume is full;
		// when even that leaves no room for the flush, badger is left unclosed, as after a
		// crash: its write-ahead log holds every acknowledged write, replayed at the next Open.
		if !s.CheckDisk() {
			s.logger.Warn("disk full at close: badger's memtable left unflushed in its write-ahead log, replayed at the next start",
				"memtable", s.memtable)
			return nil
		}
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close badger: %w", err)
	}
	if s.marks != nil {
		s.marks.set(s.keys.Load(), s.maxTS.Load())
		if err := s.marks.flush(); err != nil {
			return err
		}
	}
	return nil
}
