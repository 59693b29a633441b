package change

import (
	"fmt"
	"slices"
	"strings"

	"ringkv/node/ring"
)

// copies is, for one plan, where each move's data can come from now that some members do
// not answer: the moves whose range has no live replica left (their data would be lost) and
// those whose receiver does not answer (the range stays short of a replica until it is
// back or removed in turn). Both refuse the change unless forced; a forced change marks
// them done at once, so that it completes while those nodes stay down.
type copies struct {
	lost, unreceived []ring.Move
}

// candidates are the nodes a move's data can be pulled from, in the order a receiver tries
// them: the move's source, then the range's other current replicas (never the target).
func candidates(cur *ring.Ring, mv ring.Move) []string {
	out := []string{mv.Source}
	for _, r := range cur.Lookup(mv.End, cur.ReplicationFactor()) {
		if r.ID != mv.Source && r.ID != mv.Target {
			out = append(out, r.ID)
		}
	}
	return out
}

// liveCopies sorts the moves by what the members' answers allow (dead: members that did not
// answer).
func liveCopies(cur *ring.Ring, moves []ring.Move, dead map[string]bool) copies {
	var c copies
	for _, mv := range moves {
		if !slices.ContainsFunc(candidates(cur, mv), func(id string) bool { return !dead[id] }) {
			c.lost = append(c.lost, mv)
			continue
		}
		if dead[mv.Target] {
			c.unreceived = append(c.unreceived, mv)
		}
	}
	return c
}

// skipped reports whether a forced change marks mv done without streaming it.
func (c copies) skipped(mv ring.Move) bool {
	return slices.Contains(c.lost, mv) || slices.Contains(c.unreceived, mv)
}

// refusals words the moves that forcing would give up on, naming their ranges.
func (c copies) refusals() []string {
	var out []string
	if len(c.lost) > 0 {
		out = append(out, fmt.Sprintf("no live replica holds %s: their data would be lost", rangeList(c.lost)))
	}
	byTarget := map[string][]ring.Move{}
	var targets []string
	for _, mv := range c.unreceived {
		if _, ok := byTarget[mv.Target]; !ok {
			targets = append(targets, mv.Target)
		}
		byTarget[mv.Target] = append(byTarget[mv.Target], mv)
	}
	slices.Sort(targets)
	for _, t := range targets {
		out = append(out, fmt.Sprintf("%s does not answer: %s would stay under-replicated until it is back or removed", t, rangeList(byTarget[t])))
	}
	return out
}

// maxListed is how many ranges a refusal names before it counts the rest.
const maxListed = 8

// rangeList names the ranges of moves: "3 ranges (a, b], (c, d], (e, f]", or the first
// maxListed and how many more.
func rangeList(moves []ring.Move) string {
	seen := map[[2]uint64]bool{}
	var names []string
	for _, mv := range moves {
		k := [2]uint64{mv.Start, mv.End}
		if seen[k] {
			continue
		}
		seen[k] = true
		names = append(names, ring.FormatRange(mv.Start, mv.End))
	}
	noun := "ranges"
	if len(names) == 1 {
		noun = "range"
	}
	shown := names[:min(len(names), maxListed)]
	s := fmt.Sprintf("%d %s %s", len(names), noun, strings.Join(shown, " "))
	if more := len(names) - len(shown); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
