// Package metrics measures a ringkv node: request rates, latency and errors per operation and
// role, load per vnode, breaker states, disk and runtime numbers, for Admin API snapshots
// (Snapshot) and Prometheus (which node/admin serves on the admin listener), and keeps the
// tail of the node's log (LogRing).
//
// The request path touches only atomics and, for latency, one of a few uncontended mutexes:
// see BenchmarkObserveOp and BenchmarkObserveVnode.
package metrics

import (
	"cmp"
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// ErrorKinds are the kinds errors are counted by (the "kind" label). An unknown kind counts
// as "internal".
var ErrorKinds = [...]string{rpcerr.KindTimeout, rpcerr.KindCanceled, rpcerr.KindUnavailable, rpcerr.KindBreakerOpen,
	rpcerr.KindInvalid, rpcerr.KindInternal}

const (
	numOps   = replica.NumOps
	numRoles = replica.NumRoles
	numSlots = numOps * numRoles
	numKinds = len(ErrorKinds)
)

// Registry collects one node's numbers. It implements replica.Observer and
// replica.VnodeObserver. Safe for concurrent use. It owns no goroutine: rates decay, latency
// windows rotate and key counts refresh only while Run runs.
type Registry struct {
	cfg   Config
	start time.Time

	slots      [numSlots]opSlot
	reconciled atomic.Uint64
	hints      atomic.Uint64
	// recent holds the last second's latencies per role (every op together).
	recent [numRoles]*recent

	vt atomic.Pointer[vnodeTable]
	mu sync.Mutex // guards rebuilding vt and ticking its rates

}

type opSlot struct {
	count    rate
	errors   atomic.Uint64
	kinds    [numKinds]atomic.Uint64
	sumNanos atomic.Uint64
	lat      *latency
}

// vnodeTable is the per-vnode counters for one ring, sorted by range end token. Immutable
// apart from the counters; replaced when the ring changes (counters carried over by end token).
type vnodeTable struct {
	ring   *ring.Ring
	ends   []uint64
	starts []uint64
	mine   []bool // this node is one of the range's replicas
	v      []vnode
}

type vnode struct {
	reads, writes     rate
	bytesIn, bytesOut rate
	keys, bytes       atomic.Uint64 // from the last CountRange
	// counted: keys and bytes hold a count of this range as this node now holds it (counted
	// in this table, or carried from the previous ring when the range and whether this node
	// replicates it are unchanged).
	counted atomic.Bool
}

// New returns a Registry. Zero periods in cfg take DefaultConfig's values.
func New(cfg Config) *Registry {
	def := DefaultConfig()
	if cfg.Tick <= 0 {
		cfg.Tick = def.Tick
	}
	if cfg.LatencyWindow < 2*cfg.Tick {
		cfg.LatencyWindow = max(def.LatencyWindow, 2*cfg.Tick)
	}
	if cfg.CountInterval <= 0 {
		cfg.CountInterval = def.CountInterval
	}
	if cfg.LoadWindow <= 0 {
		cfg.LoadWindow = def.LoadWindow
	}
	if cfg.ErrorKind == nil {
		cfg.ErrorKind = DefaultErrorKind
	}
	r := &Registry{cfg: cfg, start: time.Now()}
	for i := range r.slots {
		r.slots[i].lat = newLatency()
	}
	for i := range r.recent {
		r.recent[i] = newRecent(nil)
	}
	return r
}

// DefaultErrorKind classifies an error by the one error table (rpcerr.Kind): the reasons it
// carries, else its gRPC code.
func DefaultErrorKind(err error) string { return rpcerr.Kind(err) }

func kindIndex(kind string) int {
	for i, k := range ErrorKinds {
		if k == kind {
			return i
		}
	}
	return numKinds - 1 // internal
}

func slotIndex(op replica.Op, role replica.Role) int {
	if int(op) >= numOps || int(role) >= numRoles {
		return -1
	}
	return int(op)*numRoles + int(role)
}

// ObserveOp records one operation. Unknown operations and roles are ignored.
func (r *Registry) ObserveOp(op replica.Op, role replica.Role, d time.Duration, err error) {
	i := slotIndex(op, role)
	if i < 0 {
		return
	}
	s := &r.slots[i]
	s.count.add(1)
	if d > 0 {
		s.sumNanos.Add(uint64(d))
	}
	s.lat.record(d)
	r.recent[i%numRoles].record(d)
	if err != nil {
		s.errors.Add(1)
		s.kinds[kindIndex(r.cfg.ErrorKind(err))].Add(1)
	}
}

// RecentP99 returns the p99 latency of the operations in role (coordinator or replica)
// observed over about the last second (1–1.1 s, at most 25% above the true value), and how
// many there were; 0, 0 when there were none or the role is unknown. Cheap and lock-free:
// meant to be polled, as by a ring change pacing its streams (stream.RangeClient.Latency).
func (r *Registry) RecentP99(role replica.Role) (time.Duration, uint64) {
	i := slotIndex(replica.OpGet, role)
	if i < 0 {
		return 0, 0
	}
	return r.recent[i%numRoles].quantile(0.99, RecentWindow)
}

// RecentP99Over is RecentP99 over about the last span instead (a multiple of 100 ms, at most
// RecentWindow; the current, partial 100 ms included): what a ring change's pace decides on
// once per span.
func (r *Registry) RecentP99Over(role replica.Role, span time.Duration) (time.Duration, uint64) {
	i := slotIndex(replica.OpGet, role)
	if i < 0 {
		return 0, 0
	}
	return r.recent[i%numRoles].quantile(0.99, span)
}

// Reconciled counts one replica a read brought up to date (read reconciliation).
func (r *Registry) Reconciled() { r.reconciled.Add(1) }

// Hint counts one hinted handoff stored for a down replica.
func (r *Registry) Hint() { r.hints.Add(1) }

// ObserveVnode records one local read (write=false) or write of bytes bytes at token,
// attributed to the vnode range of the current ring that holds the token.
func (r *Registry) ObserveVnode(token uint64, write bool, bytes int) {
	t := r.table()
	if t == nil {
		return
	}
	v := &t.v[t.index(token)]
	n := uint64(max(bytes, 0))
	if write {
		v.writes.add(1)
		v.bytesIn.add(n)
	} else {
		v.reads.add(1)
		v.bytesOut.add(n)
	}
}

// index is the vnode holding token: the first range whose end is >= token, wrapping to the
// first range (the one that spans 0) past the last end.
func (t *vnodeTable) index(token uint64) int {
	i, _ := slices.BinarySearch(t.ends, token)
	if i == len(t.ends) {
		return 0
	}
	return i
}

// table returns the vnode table for the current ring, rebuilding it when the ring changed.
func (r *Registry) table() *vnodeTable {
	if r.cfg.Ring == nil {
		return nil
	}
	rg := r.cfg.Ring()
	if rg == nil {
		return nil
	}
	if t := r.vt.Load(); t != nil && t.ring == rg {
		return t
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.vt.Load(); t != nil && t.ring == rg {
		return t
	}
	t := buildTable(rg, r.cfg.ID, r.vt.Load())
	r.vt.Store(t)
	return t
}

func buildTable(rg *ring.Ring, self string, old *vnodeTable) *vnodeTable {
	ranges := rg.Ranges()
	slices.SortFunc(ranges, func(a, b ring.Range) int { return cmp.Compare(a.End, b.End) })
	t := &vnodeTable{
		ring:   rg,
		ends:   make([]uint64, len(ranges)),
		starts: make([]uint64, len(ranges)),
		mine:   make([]bool, len(ranges)),
		v:      make([]vnode, len(ranges)),
	}
	n := rg.Replicas()
	for i, rr := range ranges {
		t.ends[i], t.starts[i] = rr.End, rr.Start
		for _, m := range rg.Lookup(rr.End, n) {
			if m.ID == self {
				t.mine[i] = true
				break
			}
		}
		if old == nil {
			continue
		}
		if j, ok := slices.BinarySearch(old.ends, rr.End); ok {
			ov, nv := &old.v[j], &t.v[i]
			nv.reads.carry(&ov.reads)
			nv.writes.carry(&ov.writes)
			nv.bytesIn.carry(&ov.bytesIn)
			nv.bytesOut.carry(&ov.bytesOut)
			if old.starts[j] == rr.Start {
				nv.keys.Store(ov.keys.Load())
				nv.bytes.Store(ov.bytes.Load())
				// Same range, same role: the count still holds until the periodic recount.
				nv.counted.Store(ov.counted.Load() && old.mine[j] == t.mine[i])
			}
		}
	}
	return t
}

// recountAfterChange is the least time between key recounts when the ring's epoch changes.
const recountAfterChange = 5 * time.Second

// countPause separates the ranges of a recount.
const countPause = time.Millisecond

// Run decays the rates every Tick, rotates the latency windows and refreshes the per-vnode
// key counts every CountInterval (and soon after the ring changes). It blocks until ctx ends
// and returns nil then.
func (r *Registry) Run(ctx context.Context) error {
	tick := time.NewTicker(r.cfg.Tick)
	defer tick.Stop()
	last := time.Now()
	lastRotate := last
	var counted *vnodeTable
	var countedEpoch uint64
	var lastCount time.Time
	for {
		// Recount every range every CountInterval, and soon after the ring's epoch changes
		// (ranges moved) only the ranges whose counts it did not carry over (split, or gained
		// or lost by this node) — not on every new ring value: a change in flight republishes
		// the ring as its moves finish, and a full recount (a keys-only scan of the whole
		// store) right after a change competes with the clients and the old owners' deletes.
		if t := r.table(); t != nil {
			since := time.Since(lastCount)
			moved := counted == nil || t.ring.Epoch() != countedEpoch
			switch {
			case since >= r.cfg.CountInterval:
				r.refreshCounts(ctx, t, true)
				counted, countedEpoch, lastCount = t, t.ring.Epoch(), time.Now()
			case moved && since >= recountAfterChange:
				r.refreshCounts(ctx, t, false)
				counted, countedEpoch, lastCount = t, t.ring.Epoch(), time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			r.tick(now.Sub(last))
			last = now
			if now.Sub(lastRotate) >= r.cfg.LatencyWindow/2 {
				r.rotate()
				lastRotate = now
			}
		}
	}
}

// tick folds the last dt into every rate.
func (r *Registry) tick(dt time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.slots {
		r.slots[i].count.tick(dt, r.cfg.LoadWindow)
	}
	if t := r.vt.Load(); t != nil {
		for i := range t.v {
			v := &t.v[i]
			v.reads.tick(dt, r.cfg.LoadWindow)
			v.writes.tick(dt, r.cfg.LoadWindow)
			v.bytesIn.tick(dt, r.cfg.LoadWindow)
			v.bytesOut.tick(dt, r.cfg.LoadWindow)
		}
	}
}

func (r *Registry) rotate() {
	for i := range r.slots {
		r.slots[i].lat.rotate()
	}
}

// refreshCounts counts the keys of every range of t (together they cover the token space,
// so their sum is the store's key count), or with all false only those not counted yet.
// Ranges this node does not hold cost one seek.
func (r *Registry) refreshCounts(ctx context.Context, t *vnodeTable, all bool) {
	if r.cfg.Store == nil {
		return
	}
	pause := time.NewTimer(0)
	defer pause.Stop()
	for i := range t.v {
		if !all && t.v[i].counted.Load() {
			continue
		}
		// Pace the scan: a short pause between ranges spreads a large store's recount so
		// the clients' requests keep the disk and CPU between ranges.
		pause.Reset(countPause)
		select {
		case <-ctx.Done():
			return
		case <-pause.C:
		}
		keys, bytes, err := r.cfg.Store.CountRange(t.starts[i], t.ends[i])
		if err != nil {
			continue // store closing; the next refresh retries
		}
		t.v[i].keys.Store(keys)
		t.v[i].bytes.Store(bytes)
		t.v[i].counted.Store(true)
	}
}

// Snapshot returns the node's numbers now; withVnodes adds one VnodeStats per vnode this node
// replicates (or has served since the ring changed).
func (r *Registry) Snapshot(withVnodes bool) *kvpb.NodeStats {
	ns := &kvpb.NodeStats{
		Id:                  r.cfg.ID,
		UnixNanos:           time.Now().UnixNano(),
		Errors:              map[string]uint64{},
		ReadReconciliations: r.reconciled.Load(),
		Hints:               r.hints.Load(),
		Goroutines:          uint32(runtime.NumGoroutine()),
	}
	if d, ok := r.cfg.Store.(interface{ DiskFull() error }); ok && d.DiskFull() != nil {
		ns.DiskFull = true
	}
	if rg := r.ringNow(); rg != nil {
		ns.Epoch = rg.Epoch()
		if m, ok := rg.Member(r.cfg.ID); ok {
			ns.State = m.State.Proto()
		}
	}
	coord := newHist()
	scratch := newHist()
	for i := range r.slots {
		s := &r.slots[i]
		scratch.Reset()
		s.lat.mergeInto(scratch)
		q := quantilesOf(scratch)
		os := &kvpb.OpStats{
			Op:      replica.Op(i / numRoles).Proto(),
			Role:    replica.Role(i % numRoles).Proto(),
			Count:   s.count.total.Load(),
			Errors:  s.errors.Load(),
			Rate_1S: s.count.rate1s(),
			Rate_1M: s.count.rate1m(),
			P50Ms:   q.p50,
			P99Ms:   q.p99,
			P999Ms:  q.p999,
			MaxMs:   q.max,
		}
		ns.Ops = append(ns.Ops, os)
		for k := range s.kinds {
			if n := s.kinds[k].Load(); n > 0 {
				ns.Errors[ErrorKinds[k]] += n
			}
		}
		if replica.Role(i%numRoles) == replica.RoleCoordinator { // what clients see
			ns.OpsPerSec += os.Rate_1S
			coord.Merge(scratch)
		}
	}
	// A p99 over a handful of operations is their slowest, not a percentile: none (0) below
	// kvpb.MinLatencySamples.
	if coord.TotalCount() >= kvpb.MinLatencySamples {
		ns.P99Ms = quantilesOf(coord).p99
	}
	if r.cfg.Store != nil {
		lsm, vlog := r.cfg.Store.Size()
		ns.DiskBytes = uint64(max(lsm+vlog, 0))
		ns.Keys = uint64(max(r.cfg.Store.KeyCount(), 0))
	}
	if t := r.table(); t != nil {
		for i := range t.v {
			v := &t.v[i]
			if r.cfg.Store == nil {
				ns.Keys += v.keys.Load()
			}
			if !withVnodes {
				continue
			}
			reads, writes := v.reads.total.Load(), v.writes.total.Load()
			if !t.mine[i] && reads == 0 && writes == 0 {
				continue
			}
			ns.Vnodes = append(ns.Vnodes, &kvpb.VnodeStats{
				Token:       t.ends[i],
				Start:       t.starts[i],
				Reads_1S:    v.reads.rate1s(),
				Writes_1S:   v.writes.rate1s(),
				Reads_1M:    v.reads.rate1m(),
				Writes_1M:   v.writes.rate1m(),
				BytesIn_1S:  v.bytesIn.rate1s(),
				BytesOut_1S: v.bytesOut.rate1s(),
				Keys:        v.keys.Load(),
				Bytes:       v.bytes.Load(),
				ReadsTotal:  reads,
				WritesTotal: writes,
			})
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	ns.HeapBytes = ms.HeapAlloc
	ns.GcPauseTotalNs = ms.PauseTotalNs
	if ms.NumGC > 0 {
		ns.GcPauseLastNs = ms.PauseNs[(ms.NumGC+255)%256]
	}
	return ns
}

func (r *Registry) ringNow() *ring.Ring {
	if r.cfg.Ring == nil {
		return nil
	}
	return r.cfg.Ring()
}

var (
	_ replica.Observer      = (*Registry)(nil)
	_ replica.VnodeObserver = (*Registry)(nil)
)
