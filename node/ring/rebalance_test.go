package ring

import (
	"errors"
	"testing"
)

func maxOf(m map[string]float64) (string, float64) {
	id, top := "", -1.0
	for k, v := range m {
		if v > top || (v == top && k < id) {
			id, top = k, v
		}
	}
	return id, top
}

// evenly spreads each range's load over its replicas in r.
func evenly(r *Ring, perRange map[uint64]float64) RangeLoad {
	out := RangeLoad{}
	for t, l := range perRange {
		set := r.Lookup(t, r.Replicas())
		out[t] = map[string]float64{}
		for _, m := range set {
			out[t][m.ID] = l / float64(len(set))
		}
	}
	return out
}

func TestPlanRebalanceMovesLoadOffTheHotNode(t *testing.T) {
	r := founderRing(t, 4, 32, 3)
	// Uniform load: founders' tokens are balanced, nothing moves.
	perRange := map[uint64]float64{}
	for _, rr := range r.Ranges() {
		perRange[rr.End] = 10 * rr.Fraction() * float64(r.Vnodes())
	}
	moves, next, err := PlanRebalance(r, evenly(r, perRange), DefaultRebalanceConfig())
	if err != nil || len(moves) != 0 || next != nil {
		t.Fatalf("uniform load: moves %v, next %v, err %v; want none", moves, next, err)
	}

	// Four vnodes of n01 carry 40x the load of the others (spread over their 3 replicas).
	m, _ := r.Member("n01")
	for _, tok := range m.Tokens[:4] {
		perRange[tok] *= 40
	}
	load := evenly(r, perRange)
	before := PredictLoad(r, r, load)
	hotNode, _ := maxOf(before)
	cfg := DefaultRebalanceConfig()
	moves, next, err = PlanRebalance(r, load, cfg)
	if err != nil {
		t.Fatalf("PlanRebalance: %v", err)
	}
	if len(moves) == 0 || len(moves) > cfg.MaxMoves {
		t.Fatalf("moves = %d, want 1..%d", len(moves), cfg.MaxMoves)
	}
	if next.Epoch() != r.Epoch()+1 {
		t.Errorf("next epoch %d, want %d", next.Epoch(), r.Epoch()+1)
	}
	if moves[0].From != hotNode {
		t.Errorf("first move %+v is not from the hottest node %s (%v)", moves[0], hotNode, before)
	}
	for _, mv := range moves {
		if owner := r.Ranges()[r.RangeIndex(mv.Token)].Owner; owner != mv.From {
			t.Errorf("move %+v: token owned by %s in the current ring", mv, owner)
		}
		if owner := next.Ranges()[next.RangeIndex(mv.Token)].Owner; owner != mv.To {
			t.Errorf("move %+v: token owned by %s in the next ring", mv, owner)
		}
	}
	after := PredictLoad(r, next, load)
	_, topBefore := maxOf(before)
	_, topAfter := maxOf(after)
	if topAfter >= topBefore*0.95 {
		t.Errorf("hottest node load %.1f -> %.1f, want at least 5%% lower (moves %v)", topBefore, topAfter, moves)
	}
	var sumB, sumA float64
	for id := range before {
		sumB += before[id]
		sumA += after[id]
	}
	if d := sumA - sumB; d > 1e-6*sumB || d < -1e-6*sumB {
		t.Errorf("total load %.3f -> %.3f: the prediction must only move load", sumB, sumA)
	}
	// Deterministic: the same input gives the same plan.
	again, _, _ := PlanRebalance(r, load, cfg)
	if len(again) != len(moves) {
		t.Fatalf("second plan has %d moves, first %d", len(again), len(moves))
	}
	for i := range moves {
		if again[i] != moves[i] {
			t.Errorf("move %d: %+v then %+v", i, moves[i], again[i])
		}
	}
}

func TestWithTokensMovedRefusals(t *testing.T) {
	r := founderRing(t, 3, 4, 3)
	a, _ := r.Member("n00")
	b, _ := r.Member("n01")
	for _, tt := range []struct {
		name  string
		moves []TokenMove
		want  error
	}{
		{"none", nil, ErrInvalidMember},
		{"unknown from", []TokenMove{{Token: a.Tokens[0], From: "zz", To: "n01"}}, ErrUnknownMember},
		{"unknown to", []TokenMove{{Token: a.Tokens[0], From: "n00", To: "zz"}}, ErrUnknownMember},
		{"not the owner", []TokenMove{{Token: b.Tokens[0], From: "n00", To: "n02"}}, ErrInvalidMember},
		{"to itself", []TokenMove{{Token: a.Tokens[0], From: "n00", To: "n00"}}, ErrInvalidMember},
		{"twice", []TokenMove{{Token: a.Tokens[0], From: "n00", To: "n01"}, {Token: a.Tokens[0], From: "n00", To: "n02"}}, ErrInvalidMember},
		{"last token", []TokenMove{
			{Token: a.Tokens[0], From: "n00", To: "n01"}, {Token: a.Tokens[1], From: "n00", To: "n01"},
			{Token: a.Tokens[2], From: "n00", To: "n01"}, {Token: a.Tokens[3], From: "n00", To: "n01"},
		}, ErrInvalidMember},
	} {
		if _, err := r.WithTokensMoved(tt.moves); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	next, err := r.WithTokensMoved([]TokenMove{{Token: a.Tokens[0], From: "n00", To: "n01"}})
	if err != nil {
		t.Fatalf("WithTokensMoved: %v", err)
	}
	na, _ := next.Member("n00")
	nb, _ := next.Member("n01")
	if len(na.Tokens) != 3 || len(nb.Tokens) != 5 {
		t.Errorf("tokens after: n00 %d, n01 %d; want 3, 5", len(na.Tokens), len(nb.Tokens))
	}
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
