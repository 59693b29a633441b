// Package hotkeys keeps a bounded summary of the keys a node coordinates, to name the hottest
// ones: the space-saving algorithm (Metwally, Agrawal, El Abbadi, "Efficient computation of
// frequent and top-k elements in data streams", 2005) per time slice, so a window of the last
// 10 s or minute can be asked for. Each listed key carries a count that is an upper bound of
// its true count and an error: the true count lies in [count-error, count].
//
// Memory is fixed at construction whatever the number of distinct keys (MemoryBound; about
// 0.9 MiB with DefaultConfig). Besides the keys, each slice counts the operations of every
// vnode exactly (the denominator of a key's share of its vnode): that takes about 40 bytes
// per vnode of the ring per slice kept, bounded by the ring's size, not by the keys. Keys are kept as bytes, at most MaxKeyBytes of each; values are
// never seen.
package hotkeys

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"
)

// MaxKeyBytes is how much of a key an entry keeps: a longer key is identified by its token
// (its 64-bit hash) and shown as its first MaxKeyBytes bytes.
const MaxKeyBytes = 128

// Config sizes a Summary.
type Config struct {
	// Slice is the length of one time slice; windows are whole slices.
	Slice time.Duration
	// Slices is how many complete slices are kept (the longest window is Slices*Slice).
	Slices int
	// Shards splits the keys by token so that concurrent Records rarely share a lock. A key
	// always falls in the same shard, so shards hold disjoint keys and merging them adds no
	// error.
	Shards int
	// Capacity is the number of keys one shard monitors in one slice.
	Capacity int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultConfig keeps 10 s slices for a minute, 8 shards of 64 keys per slice.
func DefaultConfig() Config {
	return Config{Slice: 10 * time.Second, Slices: 6, Shards: 8, Capacity: 64}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Slice < time.Millisecond:
		return fmt.Errorf("hot keys slice %v: want at least 1ms", c.Slice)
	case c.Slices < 1 || c.Slices > 1024:
		return fmt.Errorf("hot keys slices %d: want 1..1024", c.Slices)
	case c.Shards < 1 || c.Shards > 1024:
		return fmt.Errorf("hot keys shards %d: want 1..1024", c.Shards)
	case c.Capacity < 1 || c.Capacity > 1<<16:
		return fmt.Errorf("hot keys capacity %d: want 1..65536", c.Capacity)
	}
	return nil
}

// ErrWindow is returned for a window that is not a whole number of slices or longer than the
// slices kept.
var ErrWindow = errors.New("window not kept")

// Summary is the hot keys summary of one node. Safe for concurrent use.
type Summary struct {
	cfg    Config
	now    func() time.Time
	shards []shard
	vnodes []vshard
}

// vshard counts operations per vnode, for the vnodes whose token falls in it.
type vshard struct {
	mu    sync.Mutex
	slots []vslot
	_     [64]byte
}

type vslot struct {
	id  int64
	ops map[uint64]uint64 // vnode token → operations
}

type shard struct {
	mu    sync.Mutex
	slots []slot // ring of Slices+1: the complete slices and the current one
	_     [64]byte
}

// slot is one shard's space-saving summary for one slice.
type slot struct {
	id                         int64 // slice number (time / Slice); -1 when unused
	ops, reads, writes, nbytes uint64
	entries                    []entry
	idx                        map[uint64]int32 // token → index in entries
	heap                       []int32          // indices in entries, a min-heap by count
	pos                        []int32          // index in entries → position in heap
}

type entry struct {
	token                 uint64
	count, err            uint64
	reads, writes, nbytes uint64
	klen                  int32 // the key's full length
	key                   [MaxKeyBytes]byte
}

// New returns an empty Summary; cfg must be valid.
func New(cfg Config) *Summary {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	s := &Summary{cfg: cfg, now: now, shards: make([]shard, cfg.Shards), vnodes: make([]vshard, cfg.Shards)}
	for i := range s.vnodes {
		s.vnodes[i].slots = make([]vslot, cfg.Slices+1)
		for j := range s.vnodes[i].slots {
			s.vnodes[i].slots[j] = vslot{id: -1, ops: map[uint64]uint64{}}
		}
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.slots = make([]slot, cfg.Slices+1)
		for j := range sh.slots {
			sh.slots[j] = slot{
				id:      -1,
				entries: make([]entry, 0, cfg.Capacity),
				idx:     make(map[uint64]int32, cfg.Capacity),
				heap:    make([]int32, 0, cfg.Capacity),
				pos:     make([]int32, cfg.Capacity),
			}
		}
	}
	return s
}

// MemoryBound is the most memory the summary holds, in bytes, whatever keys it is fed, on a
// ring of vnodes vnodes: the entries, their index maps (counted at 48 bytes a key: Go's maps
// take about 40 at this size) and the heaps, all allocated by New, and the per-vnode counts
// (48 bytes a vnode per slice).
func (c Config) MemoryBound(vnodes int) int {
	per := int(unsafe.Sizeof(entry{})) + 48 + 4 + 4
	slots := c.Shards * (c.Slices + 1)
	keys := slots*(c.Capacity*per+int(unsafe.Sizeof(slot{}))+512) + c.Shards*int(unsafe.Sizeof(shard{}))
	return keys + (c.Slices+1)*vnodes*48 + slots*(int(unsafe.Sizeof(vslot{}))+512)
}

func (s *Summary) slice(t time.Time) int64 { return t.UnixNano() / int64(s.cfg.Slice) }

func (s *Summary) shard(token uint64) *shard {
	// The token's top byte picks heat's bucket; mix the low bits in for the shard.
	return &s.shards[(token^token>>29)%uint64(len(s.shards))]
}

// Record counts one operation on key, whose ring token is token and which falls in the vnode
// of token vnode, moving bytes bytes (the value written or read). It never allocates once
// the summary is warm.
func (s *Summary) Record(token, vnode uint64, key []byte, write bool, bytes int) {
	id := s.slice(s.now())
	sh := s.shard(token)
	sh.mu.Lock()
	sl := &sh.slots[int(id%int64(len(sh.slots)))]
	if sl.id != id {
		sl.reset(id)
	}
	sl.record(token, key, write, uint64(max(bytes, 0)))
	sh.mu.Unlock()

	vs := &s.vnodes[(vnode^vnode>>29)%uint64(len(s.vnodes))]
	vs.mu.Lock()
	vl := &vs.slots[int(id%int64(len(vs.slots)))]
	if vl.id != id {
		vl.id = id
		clear(vl.ops)
	}
	vl.ops[vnode]++
	vs.mu.Unlock()
}

func (sl *slot) reset(id int64) {
	sl.id = id
	sl.ops, sl.reads, sl.writes, sl.nbytes = 0, 0, 0, 0
	sl.entries = sl.entries[:0]
	sl.heap = sl.heap[:0]
	clear(sl.idx)
}

func (sl *slot) record(token uint64, key []byte, write bool, n uint64) {
	sl.ops++
	sl.nbytes += n
	if write {
		sl.writes++
	} else {
		sl.reads++
	}
	i, ok := sl.idx[token]
	switch {
	case ok:
	case len(sl.entries) < cap(sl.entries):
		i = int32(len(sl.entries))
		sl.entries = sl.entries[:i+1]
		sl.entries[i] = entry{token: token}
		sl.pos[i] = int32(len(sl.heap))
		sl.heap = append(sl.heap, i)
		sl.idx[token] = i
		sl.up(int(sl.pos[i]))
		sl.setKey(i, key)
	default:
		// Space saving: the least counted key gives its place, and its count becomes the
		// newcomer's error.
		i = sl.heap[0]
		e := &sl.entries[i]
		delete(sl.idx, e.token)
		*e = entry{token: token, count: e.count, err: e.count}
		sl.idx[token] = i
		sl.setKey(i, key)
	}
	e := &sl.entries[i]
	e.count++
	e.nbytes += n
	if write {
		e.writes++
	} else {
		e.reads++
	}
	sl.down(int(sl.pos[i]))
}

func (sl *slot) setKey(i int32, key []byte) {
	e := &sl.entries[i]
	e.klen = int32(len(key))
	copy(e.key[:], key)
}

func (sl *slot) less(a, b int) bool {
	return sl.entries[sl.heap[a]].count < sl.entries[sl.heap[b]].count
}

func (sl *slot) swap(a, b int) {
	sl.heap[a], sl.heap[b] = sl.heap[b], sl.heap[a]
	sl.pos[sl.heap[a]] = int32(a)
	sl.pos[sl.heap[b]] = int32(b)
}

func (sl *slot) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !sl.less(j, p) {
			return
		}
		sl.swap(j, p)
		j = p
	}
}

func (sl *slot) down(j int) {
	n := len(sl.heap)
	for {
		l := 2*j + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && sl.less(r, l) {
			m = r
		}
		if !sl.less(m, j) {
			return
		}
		sl.swap(j, m)
		j = m
	}
}

// floor is the most a key the slot does not monitor can have been counted in it.
func (sl *slot) floor() uint64 {
	if len(sl.entries) < cap(sl.entries) || len(sl.heap) == 0 {
		return 0
	}
	return sl.entries[sl.heap[0]].count
}

// Key is one listed key of a Report.
type Key struct {
	// Key is the key's first MaxKeyBytes bytes; Len its full length.
	Key   []byte
	Len   int
	Token uint64
	// Count is an upper bound of the key's operations in the window, Error how much it may
	// exceed the truth: the true count is in [Count-Error, Count].
	Count, Error uint64
	// Reads, Writes and Bytes were counted while the key was monitored: lower bounds, each
	// within Error operations of the truth.
	Reads, Writes, Bytes uint64
}

// Report is the hottest keys of a window.
type Report struct {
	// Start and End bound the window: the complete slices it covers.
	Start, End time.Time
	// Slices is how many of its slices had any operation (0: no data for the window).
	Slices int
	// Ops, Reads, Writes and Bytes are the window's exact totals over all keys.
	Ops, Reads, Writes, Bytes uint64
	// Keys are the hottest keys, by Count, highest first.
	Keys []Key
	// Vnodes are the window's exact operations per vnode token.
	Vnodes map[uint64]uint64
	// Floor bounds the count of every key not listed: a merge over nodes adds it, to count
	// and error, for a key another node lists and this one does not.
	Floor uint64
}

// Top returns the k hottest keys (k <= 0: every monitored key) of the last window, which is a
// whole number of slices, up to Slices*Slice; the slice in progress is left out.
func (s *Summary) Top(window time.Duration, k int) (Report, error) {
	n := int(window / s.cfg.Slice)
	if window <= 0 || window%s.cfg.Slice != 0 || n > s.cfg.Slices {
		return Report{}, fmt.Errorf("hot keys window %v: %w (want a multiple of %v up to %v)", window, ErrWindow, s.cfg.Slice, time.Duration(s.cfg.Slices)*s.cfg.Slice)
	}
	cur := s.slice(s.now())
	return s.top(cur-int64(n), cur, time.Unix(0, cur*int64(s.cfg.Slice)), k), nil
}

// Live returns the k hottest keys of the slice in progress up to now, and of the slice before
// it too while the one in progress is younger than half a slice: the freshest window, for an
// alert that must see a skew within seconds of its start (and forget it within a slice and a
// half of its end).
func (s *Summary) Live(k int) Report {
	now := s.now()
	cur := s.slice(now)
	first := cur
	if now.Sub(time.Unix(0, cur*int64(s.cfg.Slice))) < s.cfg.Slice/2 {
		first--
	}
	return s.top(first, cur+1, now, k)
}

// top reports the slices [first, end), the window ending at endTime.
func (s *Summary) top(first, cur int64, endTime time.Time, k int) Report {
	rep := Report{
		Start: time.Unix(0, first*int64(s.cfg.Slice)),
		End:   endTime,
	}
	seen := make(map[int64]bool)
	type acc struct {
		Key
		in int // slices it was monitored in
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		keys := map[uint64]*acc{}
		var floors uint64
		var used []*slot
		for id := first; id < cur; id++ {
			sl := &sh.slots[int(id%int64(len(sh.slots)))]
			if sl.id != id {
				continue
			}
			used = append(used, sl)
			if sl.ops > 0 {
				seen[id] = true
			}
			rep.Ops += sl.ops
			rep.Reads += sl.reads
			rep.Writes += sl.writes
			rep.Bytes += sl.nbytes
			floors += sl.floor()
			for j := range sl.entries {
				e := &sl.entries[j]
				a := keys[e.token]
				if a == nil {
					kl := min(int(e.klen), MaxKeyBytes)
					a = &acc{Key: Key{Key: append([]byte(nil), e.key[:kl]...), Len: int(e.klen), Token: e.token}}
					keys[e.token] = a
				}
				a.in++
				a.Count += e.count
				a.Error += e.err
				a.Reads += e.reads
				a.Writes += e.writes
				a.Bytes += e.nbytes
			}
		}
		// A key missing from a slice may have had up to that slice's floor there.
		for _, a := range keys {
			for _, sl := range used {
				if _, ok := sl.idx[a.Token]; !ok {
					f := sl.floor()
					a.Count += f
					a.Error += f
				}
			}
			rep.Keys = append(rep.Keys, a.Key)
		}
		sh.mu.Unlock()
		rep.Floor = max(rep.Floor, floors)
	}
	rep.Slices = len(seen)
	rep.Vnodes = map[uint64]uint64{}
	for i := range s.vnodes {
		vs := &s.vnodes[i]
		vs.mu.Lock()
		for id := first; id < cur; id++ {
			vl := &vs.slots[int(id%int64(len(vs.slots)))]
			if vl.id != id {
				continue
			}
			for v, n := range vl.ops {
				rep.Vnodes[v] += n
			}
		}
		vs.mu.Unlock()
	}
	slices.SortFunc(rep.Keys, func(a, b Key) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Token, b.Token)
	})
	if k > 0 && len(rep.Keys) > k {
		rep.Floor = max(rep.Floor, rep.Keys[k].Count)
		rep.Keys = rep.Keys[:k]
	}
	return rep
}

// Window is the longest window kept.
func (s *Summary) Window() time.Duration { return time.Duration(s.cfg.Slices) * s.cfg.Slice }

// SliceLen is the length of one slice: the shortest window.
func (s *Summary) SliceLen() time.Duration { return s.cfg.Slice }
