// Package heat keeps a node's load over time per slice of the token space: for every time step
// and each of 256 token buckets (a token's top byte, so rows mean the same key range whatever
// the ring does), the reads, writes, bytes and errors the node coordinated and their read and
// write p99. Steps are kept at three resolutions (tiers): 10 s for an hour, 1 min for a day,
// 10 min for a week. Every tier is fed every step's counts, so a coarse step holds the exact
// sum of the fine ones. Events (ring changes, restarts, ...) are kept with their times. The
// memory is allocated once (Config.MemoryBound) and the history is saved in the data
// directory, so a restart keeps it; the steps the node did not see are "no data", not zeros.
package heat

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Buckets is the number of token buckets: bucket b holds the tokens whose top byte is b.
const Buckets = 256

// Bucket returns the bucket of a ring token.
func Bucket(token uint64) int { return int(token >> 56) }

// BucketRange returns the first and last token of bucket b.
func BucketRange(b int) (first, last uint64) {
	return uint64(b) << 56, uint64(b)<<56 | (1<<56 - 1)
}

// Tier is one resolution of the history: Len steps of Step each.
type Tier struct {
	Step time.Duration
	Len  int
}

// Config sizes and places a History.
type Config struct {
	// Tiers, finest first; each Step a multiple of the first. The first tier's step is the
	// step counts are gathered in.
	Tiers []Tier
	// MaxEvents is how many events are kept (the oldest go first).
	MaxEvents int
	// Dir is where the history is saved (the file heat.bin); "" keeps it in memory only.
	Dir string
	// SaveEvery is how often Run saves the history.
	SaveEvery time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultConfig keeps 10 s steps for an hour, 1 min for a day, 10 min for a week, and 1024
// events; it saves every minute.
func DefaultConfig() Config {
	return Config{
		Tiers:     []Tier{{10 * time.Second, 360}, {time.Minute, 1440}, {10 * time.Minute, 1008}},
		MaxEvents: 1024,
		SaveEvery: time.Minute,
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if len(c.Tiers) == 0 {
		return fmt.Errorf("heat: no tiers")
	}
	for i, t := range c.Tiers {
		switch {
		case t.Step < time.Millisecond || t.Len < 1:
			return fmt.Errorf("heat tier %d: step %v, %d steps: want a step of 1ms or more and one step or more", i, t.Step, t.Len)
		case t.Step%c.Tiers[0].Step != 0:
			return fmt.Errorf("heat tier %d: step %v is not a multiple of %v", i, t.Step, c.Tiers[0].Step)
		case i > 0 && t.Step <= c.Tiers[i-1].Step:
			return fmt.Errorf("heat tier %d: step %v not coarser than %v", i, t.Step, c.Tiers[i-1].Step)
		}
	}
	if c.MaxEvents < 0 {
		return fmt.Errorf("heat: max events %d: want >= 0", c.MaxEvents)
	}
	if c.Dir != "" && c.SaveEvery <= 0 {
		return fmt.Errorf("heat: save interval %v: want > 0", c.SaveEvery)
	}
	return nil
}

// Cell is one token bucket over one step. Counters saturate at their maximum.
type Cell struct {
	Reads, Writes uint32
	Bytes         uint32
	Errors        uint32
	// ReadP99 and WriteP99 are latency histogram bins plus one; 0 when there was no sample.
	// A coarse step holds the highest p99 of its fine steps: a bound of its true p99.
	ReadP99, WriteP99 uint16
}

// MemoryBound is the most memory a History holds, in bytes: its tiers' cells and step stamps,
// the live step's histograms and the events (each capped at MaxEventText bytes of text and
// MaxEventKind of kind).
func (c Config) MemoryBound() int {
	n := 0
	for _, t := range c.Tiers {
		n += t.Len * (8 + Buckets*int(unsafe.Sizeof(Cell{})+1))
	}
	n += Buckets * int(unsafe.Sizeof(live{}))
	n += Buckets + MaxOwners*(int(unsafe.Sizeof(""))+MaxOwnerName)
	n += c.MaxEvents * (int(unsafe.Sizeof(Event{})) + MaxEventText + MaxEventKind)
	return n
}

// MaxEventText and MaxEventKind cap an event's text and kind, in bytes.
const (
	MaxEventText = 256
	MaxEventKind = 32
)

// MaxOwners is how many distinct owners (node ids) a history names; an owner beyond them is
// kept as unknown. MaxOwnerName caps an owner's id, in bytes.
const (
	MaxOwners    = 255
	MaxOwnerName = 64
)

// Event is something that happened, to be drawn on the time axis.
type Event struct {
	Time       time.Time
	Kind, Text string
}

// History is the heat history of one node. Safe for concurrent use.
type History struct {
	cfg  Config
	now  func() time.Time
	base time.Duration // the first tier's step

	live [Buckets]live

	// advanced is the last base step whose slots are stamped.
	advanced atomic.Int64

	mu     sync.Mutex // guards tiers, events and owners
	tiers  []tier
	events []Event // ring; evNext is the next slot
	evNext int
	evLen  int
	// names are the owners seen, owner o is names[o-1] (0: unknown); owners is each bucket's
	// owner now, stamped into every step the node sees.
	names  []string
	owners [Buckets]uint8
}

type tier struct {
	Tier
	stamps []int64 // step number held by each slot; -1 none
	cells  []Cell  // Len x Buckets
	owners []uint8 // Len x Buckets: each bucket's owner at the step's end (History.names)
}

type live struct {
	mu                            sync.Mutex
	step                          int64
	reads, writes, nbytes, errors uint64
	rh, wh                        [nbins]uint32
}

// New returns an empty History; cfg must be valid. Open loads a saved one.
func New(cfg Config) *History {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	h := &History{cfg: cfg, now: cfg.Now, base: cfg.Tiers[0].Step}
	if h.now == nil {
		h.now = time.Now
	}
	for _, t := range cfg.Tiers {
		tr := tier{Tier: t, stamps: make([]int64, t.Len), cells: make([]Cell, t.Len*Buckets), owners: make([]uint8, t.Len*Buckets)}
		for i := range tr.stamps {
			tr.stamps[i] = -1
		}
		h.tiers = append(h.tiers, tr)
	}
	h.events = make([]Event, cfg.MaxEvents)
	cur := h.step(h.now())
	for i := range h.live {
		h.live[i].step = cur
	}
	h.advanced.Store(cur - 1)
	h.advance(cur)
	return h
}

func (h *History) step(t time.Time) int64 { return floorDiv(t.UnixNano(), int64(h.base)) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Record counts one operation the node coordinated on a key of token token: a write or a
// read, the bytes it moved, its latency and whether it failed.
func (h *History) Record(token uint64, write bool, bytes int, d time.Duration, failed bool) {
	cur := h.step(h.now())
	if h.advanced.Load() < cur {
		h.advance(cur)
	}
	l := &h.live[Bucket(token)]
	l.mu.Lock()
	if l.step != cur {
		h.flush(Bucket(token), l, cur)
	}
	if write {
		l.writes++
		l.wh[bin(d)]++
	} else {
		l.reads++
		l.rh[bin(d)]++
	}
	l.nbytes += uint64(max(bytes, 0))
	if failed {
		l.errors++
	}
	l.mu.Unlock()
}

// advance stamps the slots of every tier up to base step cur, zeroing them: the node was up
// and saw nothing yet.
func (h *History) advance(cur int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	from := h.advanced.Load() + 1
	if from > cur {
		return
	}
	for i := range h.tiers {
		t := &h.tiers[i]
		ratio := int64(t.Step / h.base)
		first, last := floorDiv(from, ratio), floorDiv(cur, ratio)
		if last-first >= int64(t.Len) {
			first = last - int64(t.Len) + 1
		}
		for s := first; s <= last; s++ {
			t.claim(s, &h.owners)
		}
	}
	h.advanced.Store(cur)
}

// claim makes slot of step s hold s, zeroed and owned by owners if it held an older step; it
// reports false when the slot holds a newer step (s has left the tier).
func (t *tier) claim(s int64, owners *[Buckets]uint8) (int, bool) {
	i := t.slot(s)
	switch {
	case t.stamps[i] == s:
		return i, true
	case t.stamps[i] > s:
		return i, false
	}
	t.stamps[i] = s
	clear(t.cells[i*Buckets : (i+1)*Buckets])
	copy(t.owners[i*Buckets:(i+1)*Buckets], owners[:])
	return i, true
}

func (t *tier) slot(s int64) int { return int(((s % int64(t.Len)) + int64(t.Len)) % int64(t.Len)) }

// SetOwners records which node owns each bucket from now on (the owner of most of its tokens;
// "" unknown): the step in progress of every tier and the steps after it are stamped with it.
func (h *History) SetOwners(owners [Buckets]string) {
	cur := h.step(h.now())
	if h.advanced.Load() < cur {
		h.advance(cur)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for b, id := range owners {
		h.owners[b] = h.intern(id)
	}
	for i := range h.tiers {
		t := &h.tiers[i]
		if slot, ok := t.claim(floorDiv(cur, int64(t.Step/h.base)), &h.owners); ok {
			copy(t.owners[slot*Buckets:(slot+1)*Buckets], h.owners[:])
		}
	}
}

// intern returns id's number in h.names, adding it; 0 for "" or when MaxOwners are named.
// h.mu is held.
func (h *History) intern(id string) uint8 {
	if id == "" {
		return 0
	}
	id = clip(id, MaxOwnerName)
	for i, n := range h.names {
		if n == id {
			return uint8(i + 1)
		}
	}
	if len(h.names) == MaxOwners {
		return 0
	}
	h.names = append(h.names, id)
	return uint8(len(h.names))
}

// flush adds bucket b's live step to every tier and starts step cur; l.mu is held.
func (h *History) flush(b int, l *live, cur int64) {
	if l.reads+l.writes+l.errors+l.nbytes > 0 {
		rp, wp := p99(&l.rh), p99(&l.wh)
		h.mu.Lock()
		for i := range h.tiers {
			t := &h.tiers[i]
			slot, ok := t.claim(floorDiv(l.step, int64(t.Step/h.base)), &h.owners)
			if !ok {
				continue
			}
			c := &t.cells[slot*Buckets+b]
			c.Reads = sat(c.Reads, l.reads)
			c.Writes = sat(c.Writes, l.writes)
			c.Bytes = sat(c.Bytes, l.nbytes)
			c.Errors = sat(c.Errors, l.errors)
			c.ReadP99 = max(c.ReadP99, rp)
			c.WriteP99 = max(c.WriteP99, wp)
		}
		h.mu.Unlock()
		l.reads, l.writes, l.nbytes, l.errors = 0, 0, 0, 0
		clear(l.rh[:])
		clear(l.wh[:])
	}
	l.step = cur
}

func sat(a uint32, b uint64) uint32 {
	if s := uint64(a) + b; s < math.MaxUint32 {
		return uint32(s)
	}
	return math.MaxUint32
}

// The latency histogram: 8 bins per power of two of microseconds, so a p99 reported as its
// bin's upper edge is at most 12.5% above the truth; from 1 µs to 2^27 µs (134 s), longer
// latencies fall in the last bin.
const nbins = 200

func bin(d time.Duration) int {
	us := uint64(max(d.Microseconds(), 0))
	if us < 8 {
		return int(us)
	}
	e := bits.Len64(us) - 1
	b := (e-2)*8 + int(us>>(e-3)&7)
	return min(b, nbins-1)
}

// BinUpper is the upper edge of histogram bin b: the latency a p99 in that bin reports.
func BinUpper(b int) time.Duration {
	if b < 8 {
		return time.Duration(b+1) * time.Microsecond
	}
	e, sub := b/8+2, b%8
	return time.Duration(uint64(9+sub)<<(e-3)) * time.Microsecond
}

// P99 converts a cell's p99 field to a latency; ok is false when there was no sample.
func P99(v uint16) (d time.Duration, ok bool) {
	if v == 0 {
		return 0, false
	}
	return BinUpper(int(v) - 1), true
}

// MinP99Samples is the fewest operations a step's p99 is kept from: from fewer, a p99 is the
// slowest of a handful, not a percentile, and the step has none (kvpb.MinLatencySamples).
const MinP99Samples = 50

func p99(h *[nbins]uint32) uint16 {
	var n uint64
	for _, c := range h {
		n += uint64(c)
	}
	if n < MinP99Samples {
		return 0
	}
	rank := (n*99 + 99) / 100
	var seen uint64
	for b, c := range h {
		seen += uint64(c)
		if seen >= rank {
			return uint16(b + 1)
		}
	}
	return nbins
}

// AddEvent keeps an event at the clock's time.
func (h *History) AddEvent(kind, text string) { h.AddEventAt(h.now(), kind, text) }

// AddEventAt keeps an event that happened at t (a change's start as the cluster stamped it,
// say), which may be before events already kept: a query returns them in time order.
func (h *History) AddEventAt(t time.Time, kind, text string) {
	if h.cfg.MaxEvents == 0 {
		return
	}
	e := Event{Time: t, Kind: clip(kind, MaxEventKind), Text: clip(text, MaxEventText)}
	h.mu.Lock()
	h.events[h.evNext] = e
	h.evNext = (h.evNext + 1) % len(h.events)
	h.evLen = min(h.evLen+1, len(h.events))
	h.mu.Unlock()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// View is a window of one tier.
type View struct {
	Step time.Duration
	// Columns are the steps' start times, oldest first; the last may be in progress.
	Columns []time.Time
	// Present is false for a step the node did not see (down, or before its history).
	Present []bool
	// Cells holds Buckets cells per column: Cells[col*Buckets+bucket].
	Cells []Cell
	// Owners holds Buckets owners per column, as Cells: the node that owned the bucket at the
	// step's end, "" when unknown (a step not seen, or seen before owners were kept).
	Owners []string
	// Events are the events from the window's start on, oldest first.
	Events []Event
}

// Owner returns the owner of a column and bucket.
func (v *View) Owner(col, bucket int) string { return v.Owners[col*Buckets+bucket] }

// Cell returns the cell of a column and bucket.
func (v *View) Cell(col, bucket int) Cell { return v.Cells[col*Buckets+bucket] }

// Steps lists the tiers' steps, finest first.
func (h *History) Steps() []time.Duration {
	var out []time.Duration
	for _, t := range h.tiers {
		out = append(out, t.Step)
	}
	return out
}

// Span is how far back a tier of step step reaches; 0 when no tier has that step.
func (h *History) Span(step time.Duration) time.Duration {
	for _, t := range h.tiers {
		if t.Step == step {
			return time.Duration(t.Len) * t.Step
		}
	}
	return 0
}

// ErrStep is returned for a step no tier keeps.
var ErrStep = fmt.Errorf("step not kept")

// Query returns the steps of the tier of step step from since until now (at most the tier's
// length): every step that ended is complete, the one in progress holds the steps of the
// first tier that ended.
func (h *History) Query(since time.Time, step time.Duration) (View, error) {
	ti := -1
	for i, t := range h.tiers {
		if t.Step == step {
			ti = i
		}
	}
	if ti < 0 {
		return View{}, fmt.Errorf("heat step %v: %w (kept: %v)", step, ErrStep, h.Steps())
	}
	now := h.now()
	cur := h.step(now)
	if h.advanced.Load() < cur {
		h.advance(cur)
	}
	for b := range h.live {
		l := &h.live[b]
		l.mu.Lock()
		if l.step != cur {
			h.flush(b, l, cur)
		}
		l.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t := &h.tiers[ti]
	last := floorDiv(now.UnixNano(), int64(t.Step))
	first := max(floorDiv(since.UnixNano(), int64(t.Step)), last-int64(t.Len)+1)
	v := View{Step: t.Step}
	for s := first; s <= last; s++ {
		i := t.slot(s)
		v.Columns = append(v.Columns, time.Unix(0, s*int64(t.Step)))
		ok := t.stamps[i] == s
		v.Present = append(v.Present, ok)
		if ok {
			v.Cells = append(v.Cells, t.cells[i*Buckets:(i+1)*Buckets]...)
			for _, o := range t.owners[i*Buckets : (i+1)*Buckets] {
				v.Owners = append(v.Owners, h.name(o))
			}
		} else {
			v.Cells = append(v.Cells, make([]Cell, Buckets)...)
			v.Owners = append(v.Owners, make([]string, Buckets)...)
		}
	}
	start := time.Unix(0, first*int64(t.Step))
	for i := range h.evLen {
		e := h.events[(h.evNext-h.evLen+i+len(h.events))%len(h.events)]
		if !e.Time.Before(start) {
			v.Events = append(v.Events, e)
		}
	}
	slices.SortStableFunc(v.Events, func(a, b Event) int { return a.Time.Compare(b.Time) })
	return v, nil
}

// name is owner o's id, "" for unknown; h.mu is held.
func (h *History) name(o uint8) string {
	if o == 0 || int(o) > len(h.names) {
		return ""
	}
	return h.names[o-1]
}

// Run saves the history every SaveEvery until ctx ends, then once more. Without a Dir it
// only waits.
func (h *History) Run(ctx context.Context) error {
	if h.cfg.Dir == "" {
		<-ctx.Done()
		return nil
	}
	tk := time.NewTicker(h.cfg.SaveEvery)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return h.Save()
		case <-tk.C:
			if err := h.Save(); err != nil {
				return err
			}
		}
	}
}
