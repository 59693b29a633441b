package ring

import (
	"cmp"
	"slices"
)

// placer chooses a newcomer's tokens one at a time. Each token cuts a range (a, b] of some owner
// X at T: the newcomer D takes (a, T], X keeps (T, b]. That moves primary share from X to D, and
// replica share to D from the members that drop out of the preference lists of (a, T] and of the
// ranges just before a. Both shares matter: a newcomer whose cuts all sit after full-size ranges
// ends up a replica of far more than N/(n+1) of the ring (it is second and third replica of the
// whole ranges before each of its tokens), which is what a ring change streams. So every step
// scores candidate cuts (the ranges of the most overloaded members, plus the ranges right after
// the newcomer's own cuts, at several cut fractions) by how close they bring the affected members
// to a pro-rated target for both shares, and takes the best.
type placer struct {
	toks   []uint64
	own    []int32 // owner per token; d is the newcomer
	d      int32
	nAfter int // replicas after the add
	nOld   int // replicas before the add
	vn     int
	p, rep []float64 // current primary / replica shares per member
	p0, r0 []float64 // shares before the add
	pT, rT []float64 // final targets
	seen   []int32
	window []int32
	deltas []delta // replicaDeltas' result, reused
}

type delta struct {
	m      int32
	dp, dr float64
}

// placeTokens returns vnodes tokens for a newcomer of the given weight.
func (r *Ring) placeTokens(weight, vnodes int) ([]uint64, error) {
	nm := len(r.members) + 1
	pl := &placer{
		toks:   slices.Clone(r.tokens),
		own:    slices.Clone(r.owners),
		d:      int32(len(r.members)),
		nAfter: min(r.replicas, nm),
		nOld:   r.r,
		vn:     vnodes,
		p:      make([]float64, nm),
		rep:    make([]float64, nm),
		pT:     make([]float64, nm),
		rT:     make([]float64, nm),
	}
	w := float64(weight)
	for _, m := range r.members {
		w += float64(m.Weight)
	}
	for i, t := range r.tokens {
		s := span(r.prev(i), t)
		pl.p[r.owners[i]] += s
		for _, m := range r.prefs[i*r.r : (i+1)*r.r] {
			pl.rep[m] += s
		}
	}
	for i := range nm {
		wi := float64(weight)
		if i < len(r.members) {
			wi = float64(r.members[i].Weight)
		}
		pl.pT[i] = wi / w
		pl.rT[i] = float64(pl.nAfter) * wi / w
	}
	pl.p0, pl.r0 = slices.Clone(pl.p), slices.Clone(pl.rep)
	for k := range vnodes {
		if !pl.step(k) {
			return nil, ErrRingFull
		}
	}
	var out []uint64
	for i, o := range pl.own {
		if o == pl.d {
			out = append(out, pl.toks[i])
		}
	}
	return out, nil
}

func (pl *placer) size(i int) float64 {
	if i == 0 {
		return span(pl.toks[len(pl.toks)-1], pl.toks[0])
	}
	return span(pl.toks[i-1], pl.toks[i])
}

func (pl *placer) prevOwner(i int) int32 {
	if i == 0 {
		return pl.own[len(pl.own)-1]
	}
	return pl.own[i-1]
}

// replicaTerms reports whether replica shares can change at all: when the ring has at most N
// members everyone replicates everything.
func (pl *placer) replicaTerms() bool { return len(pl.p) > pl.nAfter }

// step places token k (0-based) of the newcomer.
func (pl *placer) step(k int) bool {
	frac := float64(k+1) / float64(pl.vn)
	nm := len(pl.p)
	tp := make([]float64, nm) // pro-rated targets after this step
	tr := make([]float64, nm)
	for i := range nm {
		tp[i] = pl.p0[i] + frac*(pl.pT[i]-pl.p0[i])
		tr[i] = pl.r0[i] + frac*(pl.rT[i]-pl.r0[i])
	}
	pScale := 1 / float64(nm)
	rScale := float64(pl.nAfter) / float64(nm)
	cost := func(m int32, dp, dr float64) float64 {
		a := (pl.p[m] + dp - tp[m]) / pScale
		b := (pl.p[m] - tp[m]) / pScale
		c := 0.0
		if pl.replicaTerms() {
			x := (pl.rep[m] + dr - tr[m]) / rScale
			y := (pl.rep[m] - tr[m]) / rScale
			c = x*x - y*y
		}
		return a*a - b*b + c
	}

	cands := pl.candidates(tp, tr, pScale, rScale)
	remaining := float64(pl.vn - k)
	qp := (pl.pT[pl.d] - pl.p[pl.d]) / remaining
	qr := (pl.rT[pl.d] - pl.rep[pl.d]) / remaining
	best, bestF, bestCost := -1, 0.0, 0.0
	var terms []term
	for _, i := range cands {
		s := pl.size(i)
		ds := pl.replicaDeltas(i)
		pre := 0.0 // replica share D gains before the cut range, independent of the cut point
		for _, x := range ds {
			if x.m == pl.d {
				pre += x.dr
			}
		}
		terms = pl.cutTerms(terms[:0], i, ds)
		fs := [...]float64{qp / s, (qr - pre) / s, (qp + qr - pre) / (2 * s), 0.125, 0.25, 0.5, 0.75, 0.875}
		for _, f := range fs {
			f = min(max(f, 1.0/64), 63.0/64)
			g := f * s
			c := 0.0
			for _, tm := range terms {
				c += cost(tm.m, tm.dp+tm.gp*g, tm.dr+tm.gr*g)
			}
			if best < 0 || c < bestCost {
				best, bestF, bestCost = i, f, c
			}
		}
	}
	if best < 0 {
		return false
	}
	pl.apply(best, bestF, pl.replicaDeltas(best))
	return true
}

// term is one member's share change for a cut of size g: dp + gp*g primary, dr + gr*g replica.
type term struct {
	m              int32
	dp, dr, gp, gr float64
}

// cutTerms collects the share changes of cutting range i: primary from its owner, replica of
// the cut piece from the member that drops out of its list, plus the preceding ranges' deltas ds.
func (pl *placer) cutTerms(out []term, i int, ds []delta) []term {
	add := func(m int32, dp, dr, gp, gr float64) {
		for k := range out {
			if out[k].m == m {
				out[k].dp += dp
				out[k].dr += dr
				out[k].gp += gp
				out[k].gr += gr
				return
			}
		}
		out = append(out, term{m, dp, dr, gp, gr})
	}
	add(pl.d, 0, 0, 1, 1)
	add(pl.own[i], 0, 0, -1, 0)
	if dropped := pl.droppedAt(i); dropped >= 0 {
		add(dropped, 0, 0, 0, -1)
	}
	for _, dl := range ds {
		add(dl.m, dl.dp, dl.dr, 0, 0)
	}
	return out
}

// droppedAt is the member that leaves the preference list of a piece cut from the start of range
// i when the newcomer is put in front of it (-1 when the list just grows).
func (pl *placer) droppedAt(i int) int32 {
	if pl.nAfter > pl.nOld {
		return -1
	}
	pl.seen = pl.seen[:0]
	return pl.walkNew(i, pl.nOld)
}

// walkNew walks clockwise from vnode i collecting owners not in pl.seen until the total count of
// distinct owners (pl.seen included) reaches n, and returns the last one collected.
func (pl *placer) walkNew(i, n int) int32 {
	last := int32(-1)
	have := len(pl.seen)
	for j, steps := i, 0; have < n && steps < len(pl.own); j, steps = j+1, steps+1 {
		if j == len(pl.own) {
			j = 0
		}
		o := pl.own[j]
		if !slices.Contains(pl.seen, o) {
			pl.seen = append(pl.seen, o)
			have++
			last = o
		}
	}
	return last
}

// replicaDeltas are the replica-share changes on the ranges before range i when the newcomer
// takes a token inside range i: each range whose list reaches i with fewer than N distinct
// members gains the newcomer and (at full N) loses its last member.
func (pl *placer) replicaDeltas(i int) []delta {
	if !pl.replicaTerms() {
		return nil
	}
	out := pl.deltas[:0]
	window := pl.window[:0] // distinct owners from j to i-1
	for j, steps := i-1, 0; steps < len(pl.own)-1; j, steps = j-1, steps+1 {
		if j < 0 {
			j = len(pl.own) - 1
		}
		o := pl.own[j]
		if o == pl.d {
			break
		}
		if !slices.Contains(window, o) {
			window = append(window, o)
		}
		if len(window) >= pl.nAfter {
			break
		}
		s := pl.size(j)
		out = append(out, delta{m: pl.d, dr: s})
		if pl.nAfter == pl.nOld {
			pl.seen = append(pl.seen[:0], window...)
			if m := pl.walkNew(i, pl.nOld); m >= 0 {
				out = append(out, delta{m: m, dr: -s})
			}
		}
	}
	pl.deltas, pl.window = out, window
	return out
}

// candidates: every range of the most overloaded members plus the ranges right after each of the
// newcomer's cuts, skipping the newcomer's own ranges, the remainders just after them, and ranges
// too small to cut.
func (pl *placer) candidates(tp, tr []float64, pScale, rScale float64) []int {
	const small = 1 << 12 // a ring this small: try every range
	afterOwn := false     // also cut the remainders right after the newcomer's ranges
	ok := func(i int) bool {
		return pl.own[i] != pl.d && (afterOwn || pl.prevOwner(i) != pl.d) && pl.size(i)*ringSize >= 64
	}
	var out []int
	if len(pl.toks) <= small {
		for _, afterOwn = range []bool{false, true} {
			for i := range pl.toks {
				if ok(i) {
					out = append(out, i)
				}
			}
			if len(out) > 0 {
				break
			}
		}
		return out
	}
	nm := len(pl.p) - 1
	order := make([]int32, nm)
	for i := range order {
		order[i] = int32(i)
	}
	load := func(m int32) float64 {
		return (pl.p[m]-tp[m])/pScale + (pl.rep[m]-tr[m])/rScale
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(load(b), load(a)) })
	top := order[:min(4, len(order))]
	for i, o := range pl.own {
		switch {
		case slices.Contains(top, o) && ok(i):
			out = append(out, i)
		case o == pl.d:
			for _, j := range []int{i + 2, i + 3} {
				j %= len(pl.own)
				if ok(j) {
					out = append(out, j)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// apply cuts range i at fraction f for the newcomer and updates the shares.
func (pl *placer) apply(i int, f float64, ds []delta) {
	s := pl.size(i)
	g := f * s
	take := uint64(g * ringSize)
	var prev uint64
	if i == 0 {
		prev = pl.toks[len(pl.toks)-1]
	} else {
		prev = pl.toks[i-1]
	}
	if whole := uint64(s * ringSize); s < 1 {
		take = min(max(take, 1), whole-1)
	}
	t := prev + take
	x := pl.own[i]
	dropped := pl.droppedAt(i)
	pl.p[pl.d] += g
	pl.p[x] -= g
	if pl.replicaTerms() {
		pl.rep[pl.d] += g
		if dropped >= 0 {
			pl.rep[dropped] -= g
		}
		for _, dl := range ds {
			pl.rep[dl.m] += dl.dr
		}
	} else {
		pl.rep[pl.d] = 1
	}
	// Insert t before index i (it lies inside (prev, toks[i])); a wrapping range whose cut point
	// passed 0 goes to the front.
	at := i
	if i == 0 && t < pl.toks[0] {
		at = 0
	} else if i == 0 {
		at = len(pl.toks)
	}
	pl.toks = slices.Insert(pl.toks, at, t)
	pl.own = slices.Insert(pl.own, at, pl.d)
}
