package ring

import (
	"cmp"
	"fmt"
	"slices"
)

// Move is one range a node must receive in a ring change: Target becomes a replica of the tokens
// t with Start < t <= End (Start == End: the whole ring) and streams them from Source, a replica
// of the range in the old ring.
type Move struct {
	Start, End     uint64
	Source, Target string
}

// Contains reports whether token t lies in the move's range.
func (m Move) Contains(t uint64) bool { return contains(m.Start, m.End, t) }

// Fraction is the move's share of the token space.
func (m Move) Fraction() float64 { return span(m.Start, m.End) }

// Covered is the share of the move's range (0 to 1) that lies at or before token pos, walking
// from Start: how far a token-ordered pull that has reached pos has come. pos == Start is 0.
func (m Move) Covered(pos uint64) float64 {
	if pos == m.Start || !m.Contains(pos) {
		return 0
	}
	return min(1, span(m.Start, pos)/span(m.Start, m.End))
}

func (m Move) String() string {
	return fmt.Sprintf("%s %s -> %s", FormatRange(m.Start, m.End), m.Source, m.Target)
}

// MovedFraction is the token space the moves stream, in units of the whole ring: a change that
// moves one full replica of every key reports 1.
func MovedFraction(moves []Move) float64 {
	var f float64
	for _, m := range moves {
		f += m.Fraction()
	}
	return f
}

// Plan diffs two rings. For every range between consecutive tokens of either ring it compares
// the replica sets (Lookup with each ring's Replicas()) and, for each member that replicates the
// range in next but not in old, emits a Move from a member of the old set.
//
// The source is the replica the new member displaces (a member of the old set that is not in the
// next one), paired in preference order: its copy is the one that leaves the replica set, so
// streaming exactly that copy keeps every version the old set held, including a write that
// reached only some replicas (ack < N) — Cassandra's "consistent range movement". Only where there
// is no displaced replica left (the set grows, e.g. a cluster smaller than N gains a member) does
// the source fall back to a staying replica, the one given least to send so far. The mover falls
// back to the range's other replicas when the source does not answer. Adjacent moves with the same
// source and target are merged. Moves are sorted by Start, then Target. A nil ring gives no moves.
func Plan(old, next *Ring) []Move {
	if old == nil || next == nil {
		return nil
	}
	bounds := append(slices.Clone(old.tokens), next.tokens...)
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)

	sent := map[string]float64{} // span assigned per source
	last := map[[2]string]int{}  // (source, target) -> index of its latest move
	var moves []Move
	oldSet := make([]Member, 0, old.Replicas())
	nextSet := make([]Member, 0, next.Replicas())
	var gStart uint64
	var gOld, gNext []string
	flush := func(end uint64) {
		if gOld == nil {
			return
		}
		stay := make([]string, 0, len(gOld))
		var leaving []string
		for _, id := range gOld {
			if slices.Contains(gNext, id) {
				stay = append(stay, id)
			} else {
				leaving = append(leaving, id)
			}
		}
		if len(stay) == 0 {
			stay = gOld
		}
		f := span(gStart, end)
		for _, tgt := range gNext {
			if slices.Contains(gOld, tgt) {
				continue
			}
			var src string
			if len(leaving) > 0 {
				src, leaving = leaving[0], leaving[1:]
			} else {
				src = stay[0]
				for _, s := range stay[1:] {
					if sent[s] < sent[src] {
						src = s
					}
				}
			}
			sent[src] += f
			key := [2]string{src, tgt}
			if i, ok := last[key]; ok && moves[i].End == gStart {
				moves[i].End = end
				continue
			}
			last[key] = len(moves)
			moves = append(moves, Move{Start: gStart, End: end, Source: src, Target: tgt})
		}
	}
	for j, b := range bounds {
		start := bounds[len(bounds)-1]
		if j > 0 {
			start = bounds[j-1]
		}
		os := ids(old.LookupInto(b, old.Replicas(), oldSet))
		ns := ids(next.LookupInto(b, next.Replicas(), nextSet))
		if j > 0 && slices.Equal(os, gOld) && slices.Equal(ns, gNext) {
			continue // same sets: extend the group
		}
		flush(start)
		gStart, gOld, gNext = start, os, ns
	}
	flush(bounds[len(bounds)-1])

	// Merge across the wrap: a move ending at the ring's first boundary with the same pair's move
	// starting there.
	wrap := bounds[len(bounds)-1]
	for key, i := range last {
		if moves[i].End != wrap || moves[i].Start == wrap {
			continue
		}
		for k := range moves {
			if k != i && moves[k].Start == wrap && moves[k].Source == key[0] && moves[k].Target == key[1] {
				moves[k].Start = moves[i].Start
				moves[i].Source = "" // mark deleted
				break
			}
		}
	}
	moves = slices.DeleteFunc(moves, func(m Move) bool { return m.Source == "" })
	slices.SortFunc(moves, func(a, b Move) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Target, b.Target))
	})
	return moves
}

func ids(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}
