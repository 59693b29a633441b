package ring

import (
	"math"
	"testing"
)

func ringOf(t *testing.T, replicas int, tokens map[string]uint64) *Ring {
	t.Helper()
	var ms []Member
	for id, tok := range tokens {
		ms = append(ms, Member{ID: id, Addr: id + ":1", Tokens: []uint64{tok}})
	}
	r, err := New(1, replicas, ms)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Load moves with its token range: an added node takes its share of the ranges it splits
// (by token span), a removed node's load goes to the node that takes its range over.
func TestPredictChange(t *testing.T) {
	two := map[string]uint64{"a": 100, "b": 200}
	three := map[string]uint64{"a": 100, "b": 200, "c": 150}
	for _, tc := range []struct {
		name      string
		replicas  int
		cur, next map[string]uint64
		load      RangeLoad
		want      map[string]float64
	}{
		{"add splits b's range", 1, two, three,
			RangeLoad{100: {"a": 10}, 200: {"b": 20}},
			map[string]float64{"a": 10, "b": 10, "c": 10}},
		{"remove hands c's range to b", 1, three, two,
			RangeLoad{100: {"a": 10}, 150: {"c": 10}, 200: {"b": 10}},
			map[string]float64{"a": 10, "b": 20}},
		// At 2 replicas c displaces a on (100,150] and b on (200,100].
		{"add at two replicas", 2, two, three,
			RangeLoad{100: {"a": 4, "b": 4}, 200: {"a": 6, "b": 6}},
			map[string]float64{"a": 7, "b": 6, "c": 7}},
		{"nothing changes", 2, two, two,
			RangeLoad{100: {"a": 4, "b": 4}, 200: {"a": 6, "b": 6}},
			map[string]float64{"a": 10, "b": 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PredictChange(ringOf(t, tc.replicas, tc.cur), ringOf(t, tc.replicas, tc.next), tc.load)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for id, w := range tc.want {
				if math.Abs(got[id]-w) > 1e-9 {
					t.Errorf("%s: got %.3f, want %.3f (all %v)", id, got[id], w, got)
				}
			}
		})
	}
}

// A rebalance keeps every token: PredictChange is then PredictLoad, what the planner used.
func TestPredictChangeIsPredictLoadForRebalance(t *testing.T) {
	r := founderRing(t, 4, 32, 3)
	load := RangeLoad{}
	for i, rr := range r.Ranges() {
		load[rr.End] = map[string]float64{}
		for j, m := range r.Lookup(rr.End, 3) {
			load[rr.End][m.ID] = float64(1 + i%7 + j)
		}
	}
	moves, next, err := PlanRebalance(r, load, RebalanceConfig{MaxMoves: 4, Tolerance: 0, MinGain: 0, Candidates: 8})
	if err != nil || len(moves) == 0 {
		t.Fatalf("PlanRebalance: %d moves, %v", len(moves), err)
	}
	want, got := PredictLoad(r, next, load), PredictChange(r, next, load)
	for id, w := range want {
		if math.Abs(got[id]-w) > 1e-6*w {
			t.Errorf("%s: PredictChange %.3f, PredictLoad %.3f", id, got[id], w)
		}
	}
}

func TestPredictionError(t *testing.T) {
	for _, tc := range []struct {
		pred, obs float64
		rel       float64
		off, ok   bool
	}{
		{100, 120, 0.2, false, true},
		{100, 126, 0.26, true, true},
		{100, 70, -0.3, true, true},
		{100, 75, -0.25, false, true},
		{0, 5, 0, false, false},
	} {
		rel, off, ok := PredictionError(tc.pred, tc.obs)
		if math.Abs(rel-tc.rel) > 1e-9 || off != tc.off || ok != tc.ok {
			t.Errorf("PredictionError(%v, %v): got %.3f %v %v, want %.3f %v %v", tc.pred, tc.obs, rel, off, ok, tc.rel, tc.off, tc.ok)
		}
	}
}
