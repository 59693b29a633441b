package store

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// A store opened with Config.Recover on damaged data marks the token spans it may miss
// records in. The marks persist in the sidecar (marksFile) until the ranges are repaired
// from the peers (ClearDamaged), so a restart before the repair keeps them; while a token is
// marked, the node does not count its own copy of the key as a replica's answer (see
// replica.Local.Read). Open marks the whole token space: a lost MANIFEST, a shorter
// write-ahead log or an unreadable table says nothing reliable about which keys went.

// TokenSpan is an inclusive interval of ring tokens [Lo, Hi].
type TokenSpan struct {
	Lo uint64 `json:"lo"`
	Hi uint64 `json:"hi"`
}

// allTokens is the whole token space.
var allTokens = []TokenSpan{{0, ^uint64(0)}}

// damaged is the store's set of marked spans and the damage reason. Safe for concurrent use.
type damaged struct {
	any atomic.Bool // len(spans) > 0: Damaged's fast path

	mu     sync.RWMutex
	spans  []TokenSpan // sorted, disjoint
	reason string      // what was found; "" when whole
	// unrepairable counts the ranges cleared without a repair (no other replica holds them).
	unrepairable int
}

func (d *damaged) init(spans []TokenSpan, reason string, unrepairable int) {
	d.spans, d.reason, d.unrepairable = spans, reason, unrepairable
	d.any.Store(len(spans) > 0)
}

// contains reports whether token t is marked.
func (d *damaged) contains(t uint64) bool {
	if !d.any.Load() {
		return false
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, s := range d.spans {
		if s.Lo <= t && t <= s.Hi {
			return true
		}
	}
	return false
}

// overlaps reports whether any token of the ring range (start, end] is marked.
func (d *damaged) overlaps(start, end uint64) bool {
	if !d.any.Load() {
		return false
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.overlapsLocked(start, end)
}

// subtract removes the inclusive interval [lo, hi] from sorted disjoint spans.
func subtract(in []TokenSpan, lo, hi uint64) []TokenSpan {
	out := make([]TokenSpan, 0, len(in)+1)
	for _, s := range in {
		if s.Hi < lo || hi < s.Lo {
			out = append(out, s)
			continue
		}
		if s.Lo < lo {
			out = append(out, TokenSpan{s.Lo, lo - 1})
		}
		if hi < s.Hi {
			out = append(out, TokenSpan{hi + 1, s.Hi})
		}
	}
	return out
}

// union adds spans b to sorted disjoint spans a, merging overlapping and adjacent ones.
func union(a, b []TokenSpan) []TokenSpan {
	all := slices.Concat(a, b)
	slices.SortFunc(all, func(x, y TokenSpan) int {
		switch {
		case x.Lo < y.Lo:
			return -1
		case x.Lo > y.Lo:
			return 1
		}
		return 0
	})
	var out []TokenSpan
	for _, s := range all {
		if n := len(out); n > 0 && (out[n-1].Hi == ^uint64(0) || s.Lo <= out[n-1].Hi+1) {
			out[n-1].Hi = max(out[n-1].Hi, s.Hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

// Damaged reports whether token t lies in a span marked damaged: this store may miss
// acknowledged records of keys there until the range is repaired from the peers.
func (s *Store) Damaged(t uint64) bool { return s.dmg.contains(t) }

// DamagedIn reports whether any token of the ring range (start, end] is marked damaged.
func (s *Store) DamagedIn(start, end uint64) bool { return s.dmg.overlaps(start, end) }

// DamagedSpans returns the spans marked damaged (nil when none).
func (s *Store) DamagedSpans() []TokenSpan {
	s.dmg.mu.RLock()
	defer s.dmg.mu.RUnlock()
	return slices.Clone(s.dmg.spans)
}

// ClearDamaged removes the mark of the ring range (start, end] and persists it: repaired
// says its records were repaired from every other replica; false, that no other replica
// holds it, and the store serves what is left there (Damage then keeps saying so). Once no
// span is marked, Damage is "" unless some range could not be repaired.
func (s *Store) ClearDamaged(start, end uint64, repaired bool) error {
	d := &s.dmg
	d.mu.Lock()
	before := len(d.spans)
	had := d.overlapsLocked(start, end)
	for _, r := range spans(start, end) {
		d.spans = subtract(d.spans, r.lo, r.hi)
	}
	if had && !repaired {
		d.unrepairable++
	}
	if len(d.spans) == 0 && before > 0 {
		if d.unrepairable == 0 {
			d.reason = ""
		} else {
			d.reason = fmt.Sprintf("%d ranges had no other replica to repair them from and are served as left; found: %s", d.unrepairable, d.reason)
		}
		s.logger.Info("damaged ranges repaired from the peers: none marked any more", "unrepairable", d.unrepairable)
	}
	sp, reason, un := slices.Clone(d.spans), d.reason, d.unrepairable
	d.any.Store(len(d.spans) > 0)
	d.mu.Unlock()
	if s.marks == nil || !had {
		return nil
	}
	s.marks.setDamaged(sp, reason, un)
	if err := s.marks.flush(); err != nil {
		return fmt.Errorf("clear damaged %d..%d: %w", start, end, err)
	}
	return nil
}

func (d *damaged) overlapsLocked(start, end uint64) bool {
	for _, r := range spans(start, end) {
		for _, s := range d.spans {
			if s.Lo <= r.hi && r.lo <= s.Hi {
				return true
			}
		}
	}
	return false
}
