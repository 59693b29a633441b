// Package ring maps keys to replicas: tokens are xxhash64 of the key, every member holds a set of
// virtual-node tokens, and the replicas of a key are the first n distinct members met walking the
// ring clockwise from the key's token. A vnode at token T owns the range (previous token, T].
//
// A *Ring is immutable: build one with New (or derive one with WithMember / WithoutMember) and
// share the pointer freely between goroutines. Plan diffs two rings into range moves; View routes
// reads and writes while a change is in flight.
package ring

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"

	"ringkv/proto/kvpb"
)

// Token is the ring position of a key: its xxhash64.
func Token(key []byte) uint64 { return xxhash.Sum64(key) }

// State is a member's lifecycle state. Lookup ignores it: a DOWN member stays a replica of its
// ranges (the coordinator routes around it), a JOINING member is only in the next ring of a View,
// a LEAVING member only in the current one.
type State string

// Member states.
const (
	StateUp      State = "UP"
	StateJoining State = "JOINING"
	StateLeaving State = "LEAVING"
	StateDown    State = "DOWN"
)

// Valid reports whether s is one of the four states.
func (s State) Valid() bool {
	switch s {
	case StateUp, StateJoining, StateLeaving, StateDown:
		return true
	}
	return false
}

// Proto is s on the wire.
func (s State) Proto() kvpb.NodeState {
	switch s {
	case StateUp:
		return kvpb.NodeState_NODE_STATE_UP
	case StateJoining:
		return kvpb.NodeState_NODE_STATE_JOINING
	case StateLeaving:
		return kvpb.NodeState_NODE_STATE_LEAVING
	case StateDown:
		return kvpb.NodeState_NODE_STATE_DOWN
	}
	return kvpb.NodeState_NODE_STATE_UNSPECIFIED
}

// Member is one node of the ring. New normalizes an empty State to UP and a zero Weight to 1.
// Tokens of members returned by a Ring are shared with it: do not modify them.
type Member struct {
	ID     string
	Addr   string
	State  State
	Weight int
	Tokens []uint64
}

// Range is one vnode's share of the token space: tokens t with Start < t <= End; Start == End is
// the whole ring (a ring with a single token).
type Range struct {
	Start, End uint64
	Owner      string
}

// Contains reports whether token t lies in the range.
func (r Range) Contains(t uint64) bool { return contains(r.Start, r.End, t) }

// Fraction is the range's share of the token space (0..1].
func (r Range) Fraction() float64 { return span(r.Start, r.End) }

func (r Range) String() string { return FormatRange(r.Start, r.End) + " " + r.Owner }

// FormatRange is how every surface spells the token range (start, end]: logs, kvctl and the
// console (kvpb.FormatTokenRange).
func FormatRange(start, end uint64) string { return kvpb.FormatTokenRange(start, end) }

// contains: start < t <= end, wrapping around 0 when start >= end (start == end: everything).
func contains(start, end, t uint64) bool {
	if start < end {
		return start < t && t <= end
	}
	return t > start || t <= end
}

const ringSize = float64(1 << 64)

// span is the fraction of the token space in (start, end].
func span(start, end uint64) float64 {
	if start == end {
		return 1
	}
	return float64(end-start) / ringSize
}

// Ring is an immutable consistent-hash ring. The zero value is not usable; build one with New.
type Ring struct {
	epoch    uint64
	replicas int // configured replication factor
	r        int // effective: min(replicas, len(members))
	members  []Member
	index    map[string]int32
	tokens   []uint64 // sorted
	owners   []int32  // owners[i] = index into members of the vnode at tokens[i]
	prefs    []int32  // prefs[i*r : i*r+r] = preference list (member indices) of vnode i
	// bucket[p] is the index of the first token whose top bits are >= p: a lookup scans
	// tokens[bucket[p]:bucket[p+1]] (about one token) instead of binary-searching them all.
	bucket []uint32
	shift  uint
}

// New builds a ring. It validates that there is at least one member, that IDs are non-empty and
// unique, that every member has at least one token, that no token is held twice, and that
// replicas >= 1. The members are copied.
func New(epoch uint64, replicas int, members []Member) (*Ring, error) {
	if replicas < 1 {
		return nil, fmt.Errorf("new ring: replicas %d: %w", replicas, ErrInvalidReplicas)
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("new ring: %w", ErrNoMembers)
	}
	ms := make([]Member, len(members))
	total := 0
	for i, m := range members {
		if m.ID == "" {
			return nil, fmt.Errorf("new ring: member %d: empty id: %w", i, ErrInvalidMember)
		}
		if m.State == "" {
			m.State = StateUp
		}
		if !m.State.Valid() {
			return nil, fmt.Errorf("new ring: member %s: state %q: %w", m.ID, m.State, ErrInvalidMember)
		}
		if m.Weight < 0 {
			return nil, fmt.Errorf("new ring: member %s: weight %d: %w", m.ID, m.Weight, ErrInvalidMember)
		}
		if m.Weight == 0 {
			m.Weight = 1
		}
		if len(m.Tokens) == 0 {
			return nil, fmt.Errorf("new ring: member %s: no tokens: %w", m.ID, ErrInvalidMember)
		}
		m.Tokens = slices.Clone(m.Tokens)
		slices.Sort(m.Tokens)
		ms[i] = m
		total += len(m.Tokens)
	}
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	if len(ms) > math.MaxInt32 {
		return nil, fmt.Errorf("new ring: %d members: %w", len(ms), ErrInvalidMember)
	}
	r := &Ring{
		epoch:    epoch,
		replicas: replicas,
		r:        min(replicas, len(ms)),
		members:  ms,
		index:    make(map[string]int32, len(ms)),
	}
	type vnode struct {
		token uint64
		owner int32
	}
	vs := make([]vnode, 0, total)
	for i, m := range ms {
		if i > 0 && ms[i-1].ID == m.ID {
			return nil, fmt.Errorf("new ring: member %s: %w", m.ID, ErrDuplicateMember)
		}
		r.index[m.ID] = int32(i)
		for _, t := range m.Tokens {
			vs = append(vs, vnode{t, int32(i)})
		}
	}
	slices.SortFunc(vs, func(a, b vnode) int { return cmp.Compare(a.token, b.token) })
	r.tokens = make([]uint64, len(vs))
	r.owners = make([]int32, len(vs))
	for i, v := range vs {
		if i > 0 && vs[i-1].token == v.token {
			return nil, fmt.Errorf("new ring: token %#016x held by %s and %s: %w",
				v.token, ms[vs[i-1].owner].ID, ms[v.owner].ID, ErrDuplicateToken)
		}
		r.tokens[i], r.owners[i] = v.token, v.owner
	}
	r.prefs = preferenceLists(r.owners, len(ms), r.r)
	r.buildBuckets()
	return r, nil
}

// buildBuckets indexes the tokens by their top b bits, with 2^b the power of two at or above the
// number of tokens (at most 2^20 buckets).
func (r *Ring) buildBuckets() {
	b := min(max(bits.Len(uint(len(r.tokens)-1)), 1), 20)
	r.shift = uint(64 - b)
	r.bucket = make([]uint32, 1<<b+1)
	i := 0
	for p := range r.bucket {
		for i < len(r.tokens) && r.tokens[i]>>r.shift < uint64(p) {
			i++
		}
		r.bucket[p] = uint32(i)
	}
}

// preferenceLists computes, for every vnode, the first n distinct owners walking clockwise.
func preferenceLists(owners []int32, members, n int) []int32 {
	prefs := make([]int32, len(owners)*n)
	seen := make([]int, members) // seen[m] = vnode index + 1 that last saw m
	for i := range owners {
		out := prefs[i*n : i*n : i*n+n]
		for j := i; len(out) < n; j++ {
			if j == len(owners) {
				j = 0
			}
			o := owners[j]
			if seen[o] != i+1 {
				seen[o] = i + 1
				out = append(out, o)
			}
		}
	}
	return prefs
}

// Epoch is the ring's version; every change increments it.
func (r *Ring) Epoch() uint64 { return r.epoch }

// Replicas is the replication factor capped by the number of members.
func (r *Ring) Replicas() int { return r.r }

// ReplicationFactor is the configured replication factor N, not capped: the value to persist
// and to pass to New when rebuilding the ring.
func (r *Ring) ReplicationFactor() int { return r.replicas }

// Vnodes is the number of tokens (vnodes) in the ring.
func (r *Ring) Vnodes() int { return len(r.tokens) }

// Members returns a copy of the members, sorted by ID.
func (r *Ring) Members() []Member {
	out := make([]Member, len(r.members))
	for i, m := range r.members {
		m.Tokens = slices.Clone(m.Tokens)
		out[i] = m
	}
	return out
}

// Member returns a copy of the member with this ID.
func (r *Ring) Member(id string) (Member, bool) {
	i, ok := r.index[id]
	if !ok {
		return Member{}, false
	}
	m := r.members[i]
	m.Tokens = slices.Clone(m.Tokens)
	return m, true
}

// RangeIndex is the index in Ranges() of the vnode that owns token t.
func (r *Ring) RangeIndex(t uint64) int {
	p := t >> r.shift
	lo, hi := int(r.bucket[p]), int(r.bucket[p+1])
	if hi-lo > 8 { // a crowded bucket (hand-placed tokens)
		j, _ := slices.BinarySearch(r.tokens[lo:hi], t)
		lo += j
	} else {
		for lo < hi && r.tokens[lo] < t {
			lo++
		}
	}
	if lo == len(r.tokens) {
		return 0
	}
	return lo
}

// Vnode is the token of the vnode that owns token t (its range's End).
func (r *Ring) Vnode(t uint64) uint64 { return r.tokens[r.RangeIndex(t)] }

// Lookup returns the first n distinct members clockwise from token t (n is capped by the number
// of members; n <= 0 returns nil). Lookup(t, k) is a prefix of Lookup(t, n) for k < n.
func (r *Ring) Lookup(t uint64, n int) []Member {
	if n <= 0 {
		return nil
	}
	return r.LookupInto(t, n, make([]Member, 0, min(n, len(r.members))))
}

// LookupInto is Lookup appending to dst[:0]; with cap(dst) >= n it does not allocate.
// The returned members share their Tokens with the ring: do not modify them.
func (r *Ring) LookupInto(t uint64, n int, dst []Member) []Member {
	dst = dst[:0]
	if n <= 0 {
		return dst
	}
	n = min(n, len(r.members))
	i := r.RangeIndex(t)
	if n <= r.r {
		for _, m := range r.prefs[i*r.r : i*r.r+n] {
			dst = append(dst, r.members[m])
		}
		return dst
	}
	// Longer than the precomputed lists (n > replication factor): walk.
	for j := i; len(dst) < n; j++ {
		if j == len(r.owners) {
			j = 0
		}
		m := &r.members[r.owners[j]]
		if !slices.ContainsFunc(dst, func(o Member) bool { return o.ID == m.ID }) {
			dst = append(dst, *m)
		}
	}
	return dst
}

// Ranges lists every vnode in token order: {Start, End, Owner} with Start < t <= End.
func (r *Ring) Ranges() []Range {
	out := make([]Range, len(r.tokens))
	for i, t := range r.tokens {
		out[i] = Range{Start: r.prev(i), End: t, Owner: r.members[r.owners[i]].ID}
	}
	return out
}

// prev is the token before vnode i (wrapping).
func (r *Ring) prev(i int) uint64 {
	if i == 0 {
		return r.tokens[len(r.tokens)-1]
	}
	return r.tokens[i-1]
}

// Ownership is each member's primary share of the token space; the shares sum to 1.
func (r *Ring) Ownership() map[string]float64 {
	out := make(map[string]float64, len(r.members))
	for _, m := range r.members {
		out[m.ID] = 0
	}
	for i, t := range r.tokens {
		out[r.members[r.owners[i]].ID] += span(r.prev(i), t)
	}
	return out
}

// ReplicaOwnership is each member's share of the token space held as any replica (with the
// ring's Replicas()); the shares sum to Replicas().
func (r *Ring) ReplicaOwnership() map[string]float64 {
	out := make(map[string]float64, len(r.members))
	for _, m := range r.members {
		out[m.ID] = 0
	}
	for i, t := range r.tokens {
		s := span(r.prev(i), t)
		for _, m := range r.prefs[i*r.r : (i+1)*r.r] {
			out[r.members[m].ID] += s
		}
	}
	return out
}

func (r *Ring) String() string {
	return fmt.Sprintf("ring epoch %d: %d members, %d vnodes, %d replicas", r.epoch, len(r.members), len(r.tokens), r.r)
}
