package ring

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
)

// checkPlan verifies, at every range boundary of both rings and at the midpoints, that the moves
// covering the token have exactly the members newly replicating it as targets, each once, with a
// source from its old replica set.
func checkPlan(t *testing.T, old, next *Ring, moves []Move) {
	t.Helper()
	var probes []uint64
	for _, r := range []*Ring{old, next} {
		for _, rg := range r.Ranges() {
			probes = append(probes, rg.End, rg.Start+1, rg.Start+(rg.End-rg.Start)/2)
		}
	}
	for _, tok := range probes {
		os := ids(old.Lookup(tok, old.Replicas()))
		ns := ids(next.Lookup(tok, next.Replicas()))
		var want []string
		for _, id := range ns {
			if !slices.Contains(os, id) {
				want = append(want, id)
			}
		}
		displaced := 0
		for _, id := range os {
			if !slices.Contains(ns, id) {
				displaced++
			}
		}
		var got, sources []string
		for _, m := range moves {
			if !m.Contains(tok) {
				continue
			}
			got = append(got, m.Target)
			if !slices.Contains(os, m.Source) {
				t.Fatalf("token %#x: move %v has source outside the old replicas %v", tok, m, os)
			}
			// Consistent range movement: while displaced replicas remain, each target streams
			// from a distinct displaced one, never from a replica that stays.
			if len(sources) < displaced && (slices.Contains(ns, m.Source) || slices.Contains(sources, m.Source)) {
				t.Fatalf("token %#x: move %v streams from %s, want a displaced replica of old %v next %v", tok, m, m.Source, os, ns)
			}
			sources = append(sources, m.Source)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("token %#x: targets %v, want %v (old %v, next %v)", tok, got, want, os, ns)
		}
	}
}

// keyTokens hashes k distinct keys: a uniform sample of the token space.
func keyTokens(k int) []uint64 {
	out := make([]uint64, k)
	for i := range out {
		out[i] = Token([]byte("key-" + strconv.Itoa(i)))
	}
	return out
}

func TestPlanAdd(t *testing.T) {
	keys := keyTokens(100_000)
	for _, tt := range []struct{ n, replicas int }{{3, 3}, {4, 3}, {10, 3}, {20, 3}, {5, 1}, {2, 3}} {
		t.Run(fmt.Sprintf("n=%d/N=%d", tt.n, tt.replicas), func(t *testing.T) {
			old := founderRing(t, tt.n, DefaultVnodes, tt.replicas)
			next, err := old.WithMember(Member{ID: "new"}, DefaultVnodes)
			if err != nil {
				t.Fatal(err)
			}
			moves := Plan(old, next)
			checkPlan(t, old, next, moves)
			sources := map[string]float64{}
			for _, m := range moves {
				if m.Target != "new" {
					t.Errorf("move %v: target is not the newcomer", m)
				}
				sources[m.Source] += m.Fraction()
			}
			// Ideal: every member holds N/(n+1) of the space after the add, the newcomer receives it
			// (when the ring had at most N members it simply receives everything).
			ideal := min(float64(next.Replicas())/float64(tt.n+1), 1)
			moved := MovedFraction(moves)
			keysMoved := 0
			for _, k := range keys {
				for _, m := range moves {
					if m.Contains(k) {
						keysMoved++
					}
				}
			}
			keyRatio := float64(keysMoved) / (float64(len(keys)) * ideal)
			t.Logf("moves %d, sources %d, space moved %.4f, ideal %.4f, ratio %.3f; keys moved %d, ratio to ideal %.3f",
				len(moves), len(sources), moved, ideal, moved/ideal, keysMoved, keyRatio)
			if keyRatio > 1.1 || keyRatio < 0.9 {
				t.Errorf("keys moved / ideal = %.3f, want within [0.9, 1.1]", keyRatio)
			}
			if tt.n > 1 && len(sources) < 2 {
				t.Errorf("all moves stream from %v, want the load spread over several sources", sources)
			}
			// Sources spread: none sends more than twice its fair share.
			for s, f := range sources {
				if fair := moved / float64(tt.n); f > 2*fair {
					t.Errorf("source %s sends %.4f, more than twice the fair %.4f", s, f, fair)
				}
			}
		})
	}
}

func TestPlanRemove(t *testing.T) {
	for _, n := range []int{4, 5, 10} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			old := founderRing(t, n, DefaultVnodes, 3)
			gone := "n01"
			next, err := old.WithoutMember(gone)
			if err != nil {
				t.Fatal(err)
			}
			moves := Plan(old, next)
			checkPlan(t, old, next, moves)
			for _, m := range moves {
				if m.Target == gone {
					t.Errorf("move %v targets the removed member", m)
				}
			}
			// Every range the removed member replicated gains exactly one new replica.
			got, want := MovedFraction(moves), old.ReplicaOwnership()[gone]
			t.Logf("space moved %.4f, removed member's replica share %.4f, moves %d", got, want, len(moves))
			if math.Abs(got-want) > 1e-9 {
				t.Errorf("moved %.6f, want the removed member's replica share %.6f", got, want)
			}
		})
	}
}

func TestPlanMergesAdjacent(t *testing.T) {
	old := founderRing(t, 6, 32, 3)
	next, err := old.WithMember(Member{ID: "new"}, 32)
	if err != nil {
		t.Fatal(err)
	}
	moves := Plan(old, next)
	for i, m := range moves {
		for j, o := range moves {
			if i != j && m.Source == o.Source && m.Target == o.Target && m.End == o.Start {
				t.Errorf("moves %v and %v are adjacent with the same source and target", m, o)
			}
		}
	}
}

func TestMoveContains(t *testing.T) {
	tests := []struct {
		m    Move
		tok  uint64
		want bool
	}{
		{Move{Start: 10, End: 20}, 10, false},
		{Move{Start: 10, End: 20}, 11, true},
		{Move{Start: 10, End: 20}, 20, true},
		{Move{Start: 10, End: 20}, 21, false},
		{Move{Start: math.MaxUint64 - 5, End: 5}, 0, true},
		{Move{Start: math.MaxUint64 - 5, End: 5}, math.MaxUint64, true},
		{Move{Start: math.MaxUint64 - 5, End: 5}, 6, false},
		{Move{Start: 7, End: 7}, 123, true},
	}
	for _, tt := range tests {
		if got := tt.m.Contains(tt.tok); got != tt.want {
			t.Errorf("%v.Contains(%d) = %v, want %v", tt.m, tt.tok, got, tt.want)
		}
	}
}
