package tui

import (
	"sort"

	"ringkv/proto/kvpb"
)

// ringIdx is the ring's tokens in order with their owners, to name a vnode's replicas.
type ringIdx struct {
	tokens []uint64
	owner  []string
}

func ringIndex(r *kvpb.RingState) ringIdx {
	var x ringIdx
	type pair struct {
		t uint64
		o string
	}
	var ps []pair
	for _, m := range r.GetMembers() {
		for _, t := range m.GetTokens() {
			ps = append(ps, pair{t, m.GetId()})
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].t < ps[j].t })
	for _, p := range ps {
		x.tokens = append(x.tokens, p.t)
		x.owner = append(x.owner, p.o)
	}
	return x
}

// replicas returns the first n distinct owners walking clockwise from the vnode ending at token.
func (x ringIdx) replicas(token uint64, n int) []string {
	if len(x.tokens) == 0 {
		return nil
	}
	n = max(n, 1)
	i := sort.Search(len(x.tokens), func(i int) bool { return x.tokens[i] >= token })
	var out []string
	seen := map[string]bool{}
	for k := 0; k < len(x.tokens) && len(out) < n; k++ {
		o := x.owner[(i+k)%len(x.tokens)]
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out
}

// ownerOf returns the owner of the vnode ending exactly at token t, "" when t is no token.
func (x ringIdx) ownerOf(t uint64) string {
	i := sort.Search(len(x.tokens), func(i int) bool { return x.tokens[i] >= t })
	if i < len(x.tokens) && x.tokens[i] == t {
		return x.owner[i]
	}
	return ""
}

func (x ringIdx) tokensOf(id string) []uint64 {
	var out []uint64
	for i, o := range x.owner {
		if o == id {
			out = append(out, x.tokens[i])
		}
	}
	return out
}

// prev returns the token before t on the ring (the vnode's exclusive start).
func (x ringIdx) prev(t uint64) uint64 {
	i := sort.Search(len(x.tokens), func(i int) bool { return x.tokens[i] >= t })
	if i == 0 {
		return x.tokens[len(x.tokens)-1]
	}
	return x.tokens[i-1]
}
