// Package latency keeps what a node's coordinator sees of latency: per vnode, the client reads
// and writes it answered (and their errors), and per peer replica its calls to that peer —
// per vnode, and over all vnodes with timeouts, hedged reads and breaker trips — over a short
// (10 s) and a long (1 min) window of complete 5 s slices, for the Admin API (Snapshot).
//
// Memory is bounded by design: a vnode's histograms are allocated on its first operation
// (VnodeBytes each, for a replication factor of 3), a peer's on its first call (PeerBytes);
// nothing grows with the key count or the request rate. Recording is lock-free (atomic adds
// into fixed buckets of the kvpb.LatencyHistogram layout) except when a slice turns over:
// see BenchmarkObserveOp.
package latency

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"ringkv/node/ring"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// The windows: a slice is the unit of rotation; the short window is the last ShortSlices
// complete slices, the long one the last LongSlices.
const (
	SliceLen    = 5 * time.Second
	ShortSlices = 2
	LongSlices  = 12
)

// Config configures a Tracker.
type Config struct {
	// Ring returns the ring the node routes by (nil before admission). Called on every
	// observation: it must be cheap (an atomic load).
	Ring func() *ring.Ring
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Tracker records latency per vnode and per peer replica. Safe for concurrent use; it owns no
// goroutine.
type Tracker struct {
	cfg Config

	vt atomic.Pointer[vnodeTable]
	mu sync.Mutex // guards rebuilding vt

	peersMu sync.RWMutex
	peers   map[string]*peerLat
}

// New returns a Tracker.
func New(cfg Config) *Tracker {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Tracker{cfg: cfg, peers: map[string]*peerLat{}}
}

// vnodeTable is the vnodes of one ring by range end token; a vnode's latency is allocated on
// its first operation. Replaced when the ring changes, carrying the vnodes by end token.
type vnodeTable struct {
	ring   *ring.Ring
	ends   []uint64
	starts []uint64
	v      []atomic.Pointer[vnodeLat]
}

// vnodeLat is one vnode's client reads and writes and the coordinator's calls to its peers.
type vnodeLat struct {
	mu       sync.Mutex // guards slice turnover and adding replicas
	reads    [LongSlices + 1]slot
	writes   [LongSlices + 1]slot
	replicas atomic.Pointer[[]*replicaLat]
}

type replicaLat struct {
	id    string
	calls [ShortSlices + 1]slot
	stall stall
}

// peerLat is what the coordinator saw of one peer over all vnodes.
type peerLat struct {
	mu       sync.Mutex
	stall    stall
	calls    [LongSlices + 1]slot
	timeouts [LongSlices + 1]counter
	hedges   [LongSlices + 1]counter
	trips    [LongSlices + 1]counter
}

// slot is one slice of a histogram: the slice number it holds (Unix time / SliceLen) and its
// counts; for calls, the time some call had been waiting past kvpb.SlowFloor (stall).
type slot struct {
	epoch     atomic.Int64
	counts    [kvpb.LatencyBuckets]atomic.Uint32
	maxUS     atomic.Uint32
	errors    atomic.Uint32
	stalledUS atomic.Uint64
}

// stall is the time the calls to one replica (of a vnode, or over all) spent waiting past
// kvpb.SlowFloor: the union over calls of [start+SlowFloor, end], counted in the slice of the
// call that adds to it. Calls that wait together — every call sent while a replica is stopped
// — count once, so that the time does not depend on how many calls the clients send. It
// keeps the last stretch of the union: a call that overlaps it extends it (at either end: the
// calls held by one stop complete together, in any order); one that ends before it began adds
// nothing (it may overlap an older stretch: a little is missed).
type stall struct {
	mu       sync.Mutex
	from, to int64 // Unix nanoseconds: the last stretch
}

// add counts a call that ended at end (Unix nanoseconds) after d: the part of its stretch
// past SlowFloor not counted yet goes to s.
func (st *stall) add(s *slot, end int64, d time.Duration) {
	if d <= kvpb.SlowFloor {
		return
	}
	from := end - int64(d-kvpb.SlowFloor)
	st.mu.Lock()
	var added int64
	switch {
	case end < st.from:
	case from > st.to:
		added = end - from
		st.from, st.to = from, end
	default:
		added = max(st.from-from, 0) + max(end-st.to, 0)
		st.from, st.to = min(st.from, from), max(st.to, end)
	}
	st.mu.Unlock()
	s.stalledUS.Add(uint64(added / int64(time.Microsecond)))
}

type counter struct {
	epoch atomic.Int64
	n     atomic.Uint32
}

// VnodeBytes is the memory of one vnode's latency with replicas replicas (peers among them);
// PeerBytes that of one peer's.
func VnodeBytes(replicas int) int {
	var v vnodeLat
	var r replicaLat
	// Each replica: its struct, its pointer in the replicas slice.
	return int(unsafe.Sizeof(v)) + replicas*int(unsafe.Sizeof(r)+unsafe.Sizeof(&r))
}

// PeerBytes is the memory of one peer's latency.
func PeerBytes() int {
	var p peerLat
	return int(unsafe.Sizeof(p))
}

func (t *Tracker) sliceOf(now time.Time) int64 { return now.UnixNano() / int64(SliceLen) }

// turn returns s ready to count in slice e: reset under mu when it holds an older slice;
// nil when it holds a newer one (a late observation, dropped).
func turn(mu *sync.Mutex, s *slot, e int64) *slot {
	if got := s.epoch.Load(); got == e {
		return s
	} else if got > e {
		return nil
	}
	mu.Lock()
	defer mu.Unlock()
	if got := s.epoch.Load(); got < e {
		for i := range s.counts {
			s.counts[i].Store(0)
		}
		s.maxUS.Store(0)
		s.errors.Store(0)
		s.stalledUS.Store(0)
		s.epoch.Store(e)
	} else if got > e {
		return nil
	}
	return s
}

func (s *slot) record(d time.Duration, failed bool) {
	us := uint64(max(d.Microseconds(), 0))
	s.counts[kvpb.LatencyBucket(us)].Add(1)
	u32 := uint32(min(us, 1<<32-1))
	for {
		m := s.maxUS.Load()
		if u32 <= m || s.maxUS.CompareAndSwap(m, u32) {
			break
		}
	}
	if failed {
		s.errors.Add(1)
	}
}

func bump(mu *sync.Mutex, c *counter, e int64) {
	if got := c.epoch.Load(); got != e {
		if got > e {
			return
		}
		mu.Lock()
		if c.epoch.Load() < e {
			c.n.Store(0)
			c.epoch.Store(e)
		}
		mu.Unlock()
	}
	c.n.Add(1)
}

// ObserveOp records one client operation this node coordinated on the key at token: a read
// (write false) or a write, answered after d, failed or not.
func (t *Tracker) ObserveOp(token uint64, write bool, d time.Duration, failed bool) {
	v := t.vnode(token)
	if v == nil {
		return
	}
	e := t.sliceOf(t.cfg.Now())
	slots := &v.reads
	if write {
		slots = &v.writes
	}
	if s := turn(&v.mu, &slots[e%int64(len(slots))], e); s != nil {
		s.record(d, failed)
	}
}

// ObserveCall records one call of the coordinator to the peer replica peer for the key at
// token, which took d and failed with err (nil on success).
func (t *Tracker) ObserveCall(peer string, token uint64, _ bool, d time.Duration, err error) {
	now := t.cfg.Now()
	e, end := t.sliceOf(now), now.UnixNano()
	failed := err != nil
	p := t.peer(peer)
	if s := turn(&p.mu, &p.calls[e%int64(len(p.calls))], e); s != nil {
		s.record(d, failed)
		p.stall.add(s, end, d)
	}
	if failed && rpcerr.Kind(err) == rpcerr.KindTimeout {
		bump(&p.mu, &p.timeouts[e%int64(len(p.timeouts))], e)
	}
	v := t.vnode(token)
	if v == nil {
		return
	}
	r := v.replica(peer)
	if s := turn(&v.mu, &r.calls[e%int64(len(r.calls))], e); s != nil {
		s.record(d, failed)
		r.stall.add(s, end, d)
	}
}

// ObserveHedge records a read hedged to another replica while peer had not answered.
func (t *Tracker) ObserveHedge(peer string) {
	e := t.sliceOf(t.cfg.Now())
	p := t.peer(peer)
	bump(&p.mu, &p.hedges[e%int64(len(p.hedges))], e)
}

// ObserveBreakerTrip records peer's circuit breaker opening.
func (t *Tracker) ObserveBreakerTrip(peer string) {
	e := t.sliceOf(t.cfg.Now())
	p := t.peer(peer)
	bump(&p.mu, &p.trips[e%int64(len(p.trips))], e)
}

func (v *vnodeLat) replica(id string) *replicaLat {
	if rs := v.replicas.Load(); rs != nil {
		for _, r := range *rs {
			if r.id == id {
				return r
			}
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	var cur []*replicaLat
	if rs := v.replicas.Load(); rs != nil {
		cur = *rs
		for _, r := range cur {
			if r.id == id {
				return r
			}
		}
	}
	r := &replicaLat{id: id}
	next := append(slices.Clip(cur), r)
	v.replicas.Store(&next)
	return r
}

func (t *Tracker) peer(id string) *peerLat {
	t.peersMu.RLock()
	p := t.peers[id]
	t.peersMu.RUnlock()
	if p != nil {
		return p
	}
	t.peersMu.Lock()
	defer t.peersMu.Unlock()
	if p = t.peers[id]; p == nil {
		p = &peerLat{}
		t.peers[id] = p
	}
	return p
}

// vnode returns the latency of the vnode holding token, allocating it on first use; nil
// before the node has a ring.
func (t *Tracker) vnode(token uint64) *vnodeLat {
	vt := t.table()
	if vt == nil || len(vt.ends) == 0 {
		return nil
	}
	i, _ := slices.BinarySearch(vt.ends, token)
	if i == len(vt.ends) {
		i = 0
	}
	if v := vt.v[i].Load(); v != nil {
		return v
	}
	nv := &vnodeLat{}
	if vt.v[i].CompareAndSwap(nil, nv) {
		return nv
	}
	return vt.v[i].Load()
}

func (t *Tracker) table() *vnodeTable {
	if t.cfg.Ring == nil {
		return nil
	}
	rg := t.cfg.Ring()
	if rg == nil {
		return nil
	}
	if vt := t.vt.Load(); vt != nil && vt.ring == rg {
		return vt
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.vt.Load()
	if old != nil && old.ring == rg {
		return old
	}
	ranges := rg.Ranges()
	slices.SortFunc(ranges, func(a, b ring.Range) int { return cmp.Compare(a.End, b.End) })
	vt := &vnodeTable{ring: rg, ends: make([]uint64, len(ranges)), starts: make([]uint64, len(ranges)),
		v: make([]atomic.Pointer[vnodeLat], len(ranges))}
	for i, r := range ranges {
		vt.ends[i], vt.starts[i] = r.End, r.Start
		if old == nil {
			continue
		}
		if j, ok := slices.BinarySearch(old.ends, r.End); ok {
			vt.v[i].Store(old.v[j].Load())
		}
	}
	t.vt.Store(vt)
	return vt
}
