package ring

import (
	"math"
	"slices"
)

// PredictionTolerance is how far an observed load may stray from its prediction, as a
// fraction of the prediction, before the prediction is called off (0.25 = 25%).
const PredictionTolerance = 0.25

// PredictChange is the load per member of ring next when the load measured on ring cur moves
// with its token ranges: any change, an add (next splits cur's ranges), a remove (next joins
// them) or a rebalance (the same tokens, other owners). Each range of cur is cut at the tokens
// of next; a piece carries its range's load in proportion to its share of the range's token
// span (a range's keys are spread by hash). On each piece a member in both replica sets keeps
// what it served, and a member that joins the set takes what the member it displaces served,
// paired in preference order as PredictLoad pairs them. With the same tokens in both rings it
// equals PredictLoad; with next == cur it is the measured load per member.
func PredictChange(cur, next *Ring, load RangeLoad) map[string]float64 {
	out := make(map[string]float64, len(next.members))
	for _, m := range next.members {
		out[m.ID] = 0
	}
	bounds := slices.Concat(cur.tokens, next.tokens)
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	oldBuf, newBuf := make([]Member, 0, cur.Replicas()), make([]Member, 0, next.Replicas())
	var leaving []string
	for k, u := range bounds {
		ci := cur.RangeIndex(u)
		lt := load[cur.tokens[ci]]
		if len(lt) == 0 {
			continue
		}
		prev := bounds[(k+len(bounds)-1)%len(bounds)]
		f := span(prev, u) / span(cur.prev(ci), cur.tokens[ci])
		old := cur.LookupInto(u, cur.Replicas(), oldBuf)
		nxt := next.LookupInto(u, next.Replicas(), newBuf)
		leaving = handOver(lt, old, nxt, leaving, func(id string, l float64) { out[id] += l * f })
	}
	return out
}

// PredictionError is how far observed strays from predicted, as a fraction of predicted
// ((observed-predicted)/predicted), and whether it is off: beyond PredictionTolerance either
// way. A prediction of no load has no relative error: ok is false then.
func PredictionError(predicted, observed float64) (rel float64, off, ok bool) {
	if predicted <= 0 {
		return 0, false, false
	}
	rel = (observed - predicted) / predicted
	return rel, math.Abs(rel) > PredictionTolerance, true
}
