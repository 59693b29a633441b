package ring

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// DefaultVnodes is the number of tokens per member at weight 1. With FounderTokens it keeps every
// founder's primary ownership within 1.05 of the mean (in fact within 1 + 1/DefaultVnodes).
const DefaultVnodes = 64

// FounderTokens chooses the tokens of a founding cluster: vnodes tokens per id (vnodes < 1 means
// DefaultVnodes). The result depends only on the set of ids, not their order (duplicates and empty
// ids are ignored). The len(ids)*vnodes tokens are placed by repeatedly bisecting a largest range
// (ties broken in bit-reversed order, so the halved ranges spread evenly over the ring), then dealt
// out in rounds: each round hands one token to every member in a seeded shuffle, the larger ranges
// of the round going to the members that own least so far, so primary ownership stays level and a
// member's clockwise neighbours vary (its replicas' load spreads when it fails).
func FounderTokens(ids []string, vnodes int) map[string][]uint64 {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	ids = slices.DeleteFunc(ids, func(s string) bool { return s == "" })
	out := make(map[string][]uint64, len(ids))
	n := len(ids)
	if n == 0 {
		return out
	}
	if vnodes < 1 {
		vnodes = DefaultVnodes
	}
	pos := bisectionTokens(n * vnodes)
	size := func(i int) float64 {
		if i == 0 {
			return span(pos[len(pos)-1], pos[0])
		}
		return span(pos[i-1], pos[i])
	}
	rng := splitMix(xxhash.Sum64String(strings.Join(ids, "\x00")))
	owner := make([]int, len(pos))
	owned := make([]float64, n)
	perm := make([]int, n)
	slots := make([]int, n)
	for round := range vnodes {
		for i := range perm {
			perm[i] = i
		}
		for i := n - 1; i > 0; i-- {
			j := int(rng.next() % uint64(i+1))
			perm[i], perm[j] = perm[j], perm[i]
		}
		// Least-owned members first (shuffled among equals), largest ranges first.
		slices.SortStableFunc(perm, func(a, b int) int { return cmp.Compare(owned[a], owned[b]) })
		first := round * n
		for i := range slots {
			slots[i] = first + i
		}
		slices.SortStableFunc(slots, func(a, b int) int { return cmp.Compare(size(b), size(a)) })
		for k, s := range slots {
			owner[s] = perm[k]
			owned[perm[k]] += size(s)
		}
		// No member twice in a row across the round boundary.
		if round > 0 && n > 1 && owner[first] == owner[first-1] {
			swapOwners(owner, owned, size, first, first+1)
		}
	}
	if n > 2 && owner[0] == owner[len(owner)-1] {
		swapOwners(owner, owned, size, len(owner)-1, len(owner)-2)
	}
	for i, t := range pos {
		out[ids[owner[i]]] = append(out[ids[owner[i]]], t)
	}
	return out
}

func swapOwners(owner []int, owned []float64, size func(int) float64, i, j int) {
	a, b := owner[i], owner[j]
	owned[a] += size(j) - size(i)
	owned[b] += size(i) - size(j)
	owner[i], owner[j] = b, a
}

// bisectionTokens returns m sorted tokens obtained by starting from token 0 and repeatedly
// bisecting a largest range, in bit-reversed order among equals: the 2^k grid below m, plus
// m-2^k midpoints spread evenly.
func bisectionTokens(m int) []uint64 {
	k := bits.Len(uint(m)) - 1
	base := 1 << k
	out := make([]uint64, 0, m)
	for j := range base {
		out = append(out, uint64(j)<<(64-k))
	}
	for i := range m - base {
		j := bits.Reverse64(uint64(i)) >> (64 - k)
		out = append(out, j<<(64-k)+1<<(63-k))
	}
	slices.Sort(out)
	return out
}

// splitMix is SplitMix64: a tiny PRNG whose output is fixed forever (founders must agree).
type splitMix uint64

func (s *splitMix) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// WithMember returns a new ring (epoch+1) with m added. If m.Tokens is empty the newcomer takes
// vnodes tokens chosen by placeTokens: each one cuts a range of a most-loaded member so that after
// the add every member's primary share and replica share are close to its weight's share
// (1/(n+1) at equal weights). If m.Tokens is set it is used as is and vnodes is ignored.
func (r *Ring) WithMember(m Member, vnodes int) (*Ring, error) {
	if _, ok := r.index[m.ID]; ok {
		return nil, fmt.Errorf("add member %s: %w", m.ID, ErrDuplicateMember)
	}
	if m.Weight < 0 {
		return nil, fmt.Errorf("add member %s: weight %d: %w", m.ID, m.Weight, ErrInvalidMember)
	}
	if len(m.Tokens) == 0 {
		if vnodes < 1 {
			return nil, fmt.Errorf("add member %s: vnodes %d: %w", m.ID, vnodes, ErrInvalidVnodes)
		}
		toks, err := r.placeTokens(max(m.Weight, 1), vnodes)
		if err != nil {
			return nil, fmt.Errorf("add member %s: %w", m.ID, err)
		}
		m.Tokens = toks
	}
	next, err := New(r.epoch+1, r.replicas, append(r.Members(), m))
	if err != nil {
		return nil, fmt.Errorf("add member %s: %w", m.ID, err)
	}
	return next, nil
}

// WithoutMember returns a new ring (epoch+1) without the member: its ranges fall to the clockwise
// successors.
func (r *Ring) WithoutMember(id string) (*Ring, error) {
	i, ok := r.index[id]
	if !ok {
		return nil, fmt.Errorf("remove member %s: %w", id, ErrUnknownMember)
	}
	if len(r.members) == 1 {
		return nil, fmt.Errorf("remove member %s: %w", id, ErrLastMember)
	}
	ms := r.Members()
	ms = slices.Delete(ms, int(i), int(i)+1)
	return New(r.epoch+1, r.replicas, ms)
}

// WithState returns a new ring (epoch+1) with the member's state changed; tokens stay.
func (r *Ring) WithState(id string, s State) (*Ring, error) {
	i, ok := r.index[id]
	if !ok {
		return nil, fmt.Errorf("set state of %s: %w", id, ErrUnknownMember)
	}
	if !s.Valid() {
		return nil, fmt.Errorf("set state of %s: state %q: %w", id, s, ErrInvalidMember)
	}
	ms := r.Members()
	ms[i].State = s
	return New(r.epoch+1, r.replicas, ms)
}
