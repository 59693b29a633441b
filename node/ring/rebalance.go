package ring

import (
	"fmt"
	"slices"
	"sort"
)

// TokenMove hands one vnode (the range ending at Token) from one member to another.
type TokenMove struct {
	Token    uint64
	From, To string
}

// WithTokensMoved returns the ring at the next epoch with each move's token owned by its To
// member instead of its From member. Every token must be owned by From, moved at most once,
// and every member must keep at least one token.
func (r *Ring) WithTokensMoved(moves []TokenMove) (*Ring, error) {
	if len(moves) == 0 {
		return nil, fmt.Errorf("move tokens: no moves: %w", ErrInvalidMember)
	}
	ms := r.Members()
	idx := make(map[string]int, len(ms))
	for i, m := range ms {
		idx[m.ID] = i
	}
	seen := map[uint64]bool{}
	for _, mv := range moves {
		fi, ok := idx[mv.From]
		if !ok {
			return nil, fmt.Errorf("move token %d from %s: %w", mv.Token, mv.From, ErrUnknownMember)
		}
		ti, ok := idx[mv.To]
		if !ok {
			return nil, fmt.Errorf("move token %d to %s: %w", mv.Token, mv.To, ErrUnknownMember)
		}
		if fi == ti || seen[mv.Token] {
			return nil, fmt.Errorf("move token %d from %s to %s: moved twice or to its owner: %w", mv.Token, mv.From, mv.To, ErrInvalidMember)
		}
		seen[mv.Token] = true
		j := slices.Index(ms[fi].Tokens, mv.Token)
		if j < 0 {
			return nil, fmt.Errorf("move token %d: %s does not own it: %w", mv.Token, mv.From, ErrInvalidMember)
		}
		if len(ms[fi].Tokens) == 1 {
			return nil, fmt.Errorf("move token %d: it is the last of %s: %w", mv.Token, mv.From, ErrInvalidMember)
		}
		ms[fi].Tokens = slices.Delete(ms[fi].Tokens, j, j+1)
		ms[ti].Tokens = append(ms[ti].Tokens, mv.Token)
	}
	return New(r.epoch+1, r.replicas, ms)
}

// RangeLoad is measured load by range end token, then by member: what each replica of each
// vnode served (e.g. replica reads plus writes per second).
type RangeLoad map[uint64]map[string]float64

// PredictLoad is the load per member of ring next when the load measured on ring cur moves with
// replica slots: on each range, a member in both replica sets keeps what it served, and a
// member that joins the set takes what the member it displaces served (paired in preference
// order, as Plan pairs sources and targets). Load measured on a member that does not replicate
// the range in cur is ignored. With next == cur it is the measured load per member. next must
// have cur's tokens (a rebalance moves tokens between members, it does not add or drop any).
func PredictLoad(cur, next *Ring, load RangeLoad) map[string]float64 {
	out := make(map[string]float64, len(next.members))
	for _, m := range next.members {
		out[m.ID] = 0
	}
	predictRanges(cur, next, load, func(_ uint64, id string, l float64) { out[id] += l })
	return out
}

// predictRanges calls fn with the predicted load of each member on each range of next (see
// PredictLoad), skipping zeros.
func predictRanges(cur, next *Ring, load RangeLoad, fn func(token uint64, id string, l float64)) {
	n := cur.Replicas()
	oldBuf, newBuf := make([]Member, 0, n), make([]Member, 0, next.Replicas())
	var leaving []string
	for _, t := range next.tokens {
		lt := load[t]
		if len(lt) == 0 {
			continue
		}
		old := cur.LookupInto(t, n, oldBuf)
		nxt := next.LookupInto(t, next.Replicas(), newBuf)
		leaving = handOver(lt, old, nxt, leaving, func(id string, l float64) {
			if l != 0 {
				fn(t, id, l)
			}
		})
	}
}

// handOver calls fn with what each member of nxt serves of one range whose measured load per
// member is lt, when the range's replica set goes from old to nxt: a member in both keeps what
// it served, a member that joins takes what the member it displaces served (paired in
// preference order). leaving is a buffer, returned for reuse.
func handOver(lt map[string]float64, old, nxt []Member, leaving []string, fn func(id string, l float64)) []string {
	leaving = leaving[:0]
	for _, m := range old {
		if !isIn(nxt, m.ID) {
			leaving = append(leaving, m.ID)
		}
	}
	buf := leaving
	for _, m := range nxt {
		var l float64
		switch {
		case isIn(old, m.ID):
			l = lt[m.ID]
		case len(leaving) > 0:
			l, leaving = lt[leaving[0]], leaving[1:]
		}
		fn(m.ID, l)
	}
	return buf
}

// RebalanceConfig bounds PlanRebalance.
type RebalanceConfig struct {
	// MaxMoves is the most vnodes handed over.
	MaxMoves int
	// Tolerance: stop once the most loaded member is within this fraction of the mean
	// (0.10 = 10%: founders' tokens alone leave up to ~5% between members' replica shares, and
	// moving data for less is rarely worth it).
	Tolerance float64
	// MinGain: a move must lower the most loaded member's load by at least this fraction of
	// it.
	MinGain float64
	// Candidates is how many of the hottest vnodes of the most loaded member are tried per step.
	Candidates int
}

// DefaultRebalanceConfig returns the defaults.
func DefaultRebalanceConfig() RebalanceConfig {
	return RebalanceConfig{MaxMoves: 8, Tolerance: 0.10, MinGain: 0.02, Candidates: 16}
}

// PlanRebalance chooses vnodes to hand from the most loaded members to less loaded ones, by
// PredictLoad of the measured load: greedily, one vnode per step, the move (one of the hottest
// vnodes of the most loaded member, to any other UP member) that lowers the highest predicted
// member load the most, while that is more than Tolerance above the mean and a step gains at
// least MinGain. It returns the moves and the ring after them (nil with no moves).
func PlanRebalance(r *Ring, load RangeLoad, cfg RebalanceConfig) ([]TokenMove, *Ring, error) {
	if cfg.MaxMoves <= 0 || cfg.Candidates <= 0 {
		return nil, nil, fmt.Errorf("rebalance: max moves %d, candidates %d: %w", cfg.MaxMoves, cfg.Candidates, ErrInvalidVnodes)
	}
	var moves []TokenMove
	cur := r
	for len(moves) < cfg.MaxMoves {
		ml := PredictLoad(r, cur, load)
		hot, top, sum := "", -1.0, 0.0
		for _, m := range cur.members {
			l := ml[m.ID]
			sum += l
			if l > top {
				hot, top = m.ID, l
			}
		}
		mean := sum / float64(len(cur.members))
		if sum == 0 || top <= mean*(1+cfg.Tolerance) {
			break
		}
		// The hot member's vnodes by what it is predicted to serve on them, hottest first
		// (ties by token, for a stable plan).
		hm, _ := cur.Member(hot)
		if len(hm.Tokens) < 2 {
			break
		}
		mine := map[uint64]float64{}
		predictRanges(r, cur, load, func(t uint64, id string, l float64) {
			if id == hot {
				mine[t] += l
			}
		})
		toks := slices.Clone(hm.Tokens)
		sort.SliceStable(toks, func(i, j int) bool {
			li, lj := mine[toks[i]], mine[toks[j]]
			if li != lj {
				return li > lj
			}
			return toks[i] < toks[j]
		})
		toks = toks[:min(len(toks), cfg.Candidates)]
		var best *Ring
		var bestMove TokenMove
		bestTop, bestSq := top*(1-cfg.MinGain), 0.0
		for _, t := range toks {
			if mine[t] == 0 {
				continue
			}
			for _, m := range cur.members {
				if m.ID == hot || m.State != StateUp {
					continue
				}
				mv := TokenMove{Token: t, From: hot, To: m.ID}
				next, err := cur.WithTokensMoved([]TokenMove{mv})
				if err != nil {
					return nil, nil, err
				}
				nl := PredictLoad(r, next, load)
				nt, sq := 0.0, 0.0
				for _, mm := range next.members { // in ID order: the sum must not depend on map order
					v := nl[mm.ID]
					nt = max(nt, v)
					sq += v * v
				}
				if nt < bestTop || (best != nil && nt == bestTop && sq < bestSq) {
					best, bestMove, bestTop, bestSq = next, mv, nt, sq
				}
			}
		}
		if best == nil {
			break
		}
		moves = append(moves, bestMove)
		cur = best
	}
	// One ring change: every move applied to r at once (r's epoch + 1); a vnode moved twice
	// goes straight to its last owner, and one moved back home does not move.
	var net []TokenMove
	at := map[uint64]int{}
	for _, mv := range moves {
		if i, ok := at[mv.Token]; ok {
			net[i].To = mv.To
			continue
		}
		at[mv.Token] = len(net)
		net = append(net, mv)
	}
	net = slices.DeleteFunc(net, func(mv TokenMove) bool { return mv.From == mv.To })
	if len(net) == 0 {
		return nil, nil, nil
	}
	next, err := r.WithTokensMoved(net)
	if err != nil {
		return nil, nil, err
	}
	return net, next, nil
}
