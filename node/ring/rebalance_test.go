package ring

import "testing"

func maxOf(m map[string]float64) (string, float64) {
	id, top := "", -1.0
	for k, v := range m {
		if v > top || (v == top && k < id) {
			id, top = k, v
		}
	}
	return id, top
}

// A node that serves more because it coordinates (its local replica is read first) is not
// given more: load follows the replica slot it was measured on.
func TestPlanRebalanceFollowsMeasuredLoad(t *testing.T) {
	r := founderRing(t, 4, 32, 3)
	load := RangeLoad{}
	for i, rr := range r.Ranges() {
		set := r.Lookup(rr.End, 3)
		load[rr.End] = map[string]float64{}
		for _, m := range set {
			l := 1.0
			if m.ID == "n00" {
				l = 3 // the coordinator reads its own copy
			}
			if i%17 == 0 {
				l *= 20 // a few hot vnodes
			}
			load[rr.End][m.ID] = l
		}
	}
	before := PredictLoad(r, r, load)
	hot, top := maxOf(before)
	moves, next, err := PlanRebalance(r, load, DefaultRebalanceConfig())
	if err != nil {
		t.Fatalf("PlanRebalance: %v", err)
	}
	if len(moves) == 0 {
		t.Fatalf("no moves for loads %v", before)
	}
	after := PredictLoad(r, next, load)
	if after[hot] >= top {
		t.Errorf("hottest %s: %.1f -> %.1f, want lower", hot, top, after[hot])
	}
	if _, newTop := maxOf(after); newTop >= top {
		t.Errorf("highest load %.1f -> %.1f, want lower (moves %v)", top, newTop, moves)
	}
	for _, mv := range moves {
		if mv.To == hot {
			t.Errorf("move %+v gives the most loaded node more", mv)
		}
	}
}
