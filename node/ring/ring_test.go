package ring

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// founderRing builds a ring of n members named n00, n01, ... with FounderTokens.
func founderRing(t testing.TB, n, vnodes, replicas int) *Ring {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%02d", i)
	}
	toks := FounderTokens(ids, vnodes)
	ms := make([]Member, n)
	for i, id := range ids {
		ms[i] = Member{ID: id, Addr: id + ":9090", Tokens: toks[id]}
	}
	r, err := New(1, replicas, ms)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// naiveLookup walks the ring's ranges clockwise from the token: the reference for Lookup.
func naiveLookup(r *Ring, tok uint64, n int) []string {
	rs := r.Ranges()
	start := 0
	for i, rg := range rs {
		if rg.Contains(tok) {
			start = i
			break
		}
	}
	var out []string
	for k := 0; k < len(rs) && len(out) < n; k++ {
		o := rs[(start+k)%len(rs)].Owner
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

func TestToken(t *testing.T) {
	// xxhash64 with seed 0 of the empty input.
	if got, want := Token(nil), uint64(0xef46db3751d8e999); got != want {
		t.Errorf("Token(nil) = %#x, want %#x", got, want)
	}
	if Token([]byte("a")) == Token([]byte("b")) {
		t.Errorf("Token(a) == Token(b)")
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name     string
		replicas int
		members  []Member
		want     error
	}{
		{"no members", 3, nil, ErrNoMembers},
		{"replicas 0", 0, []Member{{ID: "a", Tokens: []uint64{1}}}, ErrInvalidReplicas},
		{"empty id", 1, []Member{{ID: "", Tokens: []uint64{1}}}, ErrInvalidMember},
		{"no tokens", 1, []Member{{ID: "a"}}, ErrInvalidMember},
		{"bad state", 1, []Member{{ID: "a", State: "SLEEPY", Tokens: []uint64{1}}}, ErrInvalidMember},
		{"negative weight", 1, []Member{{ID: "a", Weight: -1, Tokens: []uint64{1}}}, ErrInvalidMember},
		{"duplicate id", 1, []Member{{ID: "a", Tokens: []uint64{1}}, {ID: "a", Tokens: []uint64{2}}}, ErrDuplicateMember},
		{"token twice in a member", 1, []Member{{ID: "a", Tokens: []uint64{1, 1}}}, ErrDuplicateToken},
		{"token in two members", 1, []Member{{ID: "a", Tokens: []uint64{1}}, {ID: "b", Tokens: []uint64{1}}}, ErrDuplicateToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(1, tt.replicas, tt.members)
			if !errors.Is(err, tt.want) {
				t.Errorf("got error %v, want %v", err, tt.want)
			}
		})
	}
}

func TestNewNormalizesAndCopies(t *testing.T) {
	toks := []uint64{30, 10, 20}
	r, err := New(7, 3, []Member{{ID: "b", Tokens: toks}, {ID: "a", Tokens: []uint64{5}, State: StateDown, Weight: 2}})
	if err != nil {
		t.Fatal(err)
	}
	toks[0] = 99 // the ring must not see this
	ms := r.Members()
	if got, want := ids(ms), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("Members ids = %v, want %v", got, want)
	}
	if got, want := ms[1].Tokens, []uint64{10, 20, 30}; !slices.Equal(got, want) {
		t.Errorf("b tokens = %v, want %v", got, want)
	}
	if got, want := ms[1].State, StateUp; got != want {
		t.Errorf("b state = %q, want %q", got, want)
	}
	if got, want := ms[1].Weight, 1; got != want {
		t.Errorf("b weight = %d, want %d", got, want)
	}
	ms[1].Tokens[0] = 12345
	if m, _ := r.Member("b"); m.Tokens[0] != 10 {
		t.Errorf("Members() shares tokens with the ring: got %d, want 10", m.Tokens[0])
	}
	if got, want := r.Replicas(), 2; got != want {
		t.Errorf("Replicas() = %d, want %d (capped by members)", got, want)
	}
	if got, want := r.ReplicationFactor(), 3; got != want {
		t.Errorf("ReplicationFactor() = %d, want %d", got, want)
	}
	if got, want := r.Epoch(), uint64(7); got != want {
		t.Errorf("Epoch() = %d, want %d", got, want)
	}
	if _, ok := r.Member("zz"); ok {
		t.Errorf("Member(zz) found, want not found")
	}
}

func TestLookupBoundaries(t *testing.T) {
	r, err := New(1, 2, []Member{
		{ID: "a", Tokens: []uint64{100}},
		{ID: "b", Tokens: []uint64{200}},
		{ID: "c", Tokens: []uint64{300}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tok  uint64
		n    int
		want []string
	}{
		{0, 1, []string{"a"}},
		{99, 1, []string{"a"}},
		{100, 1, []string{"a"}}, // a token equal to a vnode's belongs to that vnode
		{101, 1, []string{"b"}},
		{200, 2, []string{"b", "c"}},
		{300, 2, []string{"c", "a"}},
		{301, 2, []string{"a", "b"}}, // wraps
		{math.MaxUint64, 3, []string{"a", "b", "c"}},
		{150, 5, []string{"b", "c", "a"}}, // n capped by members, beyond the replication factor
		{150, 0, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%d", tt.tok, tt.n), func(t *testing.T) {
			got := ids(r.Lookup(tt.tok, tt.n))
			if len(got) == 0 {
				got = nil
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Lookup(%d, %d) = %v, want %v", tt.tok, tt.n, got, tt.want)
			}
		})
	}
}

func TestLookupSingleToken(t *testing.T) {
	r, err := New(1, 3, []Member{{ID: "solo", Tokens: []uint64{42}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []uint64{0, 42, 43, math.MaxUint64} {
		if got := ids(r.Lookup(tok, 3)); !slices.Equal(got, []string{"solo"}) {
			t.Errorf("Lookup(%d) = %v, want [solo]", tok, got)
		}
	}
	if got, want := r.Ownership()["solo"], 1.0; got != want {
		t.Errorf("Ownership = %v, want %v", got, want)
	}
	if rs := r.Ranges(); len(rs) != 1 || rs[0].Fraction() != 1 || !rs[0].Contains(7) {
		t.Errorf("Ranges = %v, want one whole-ring range", rs)
	}
}

// Lookup must match a naive walk, and a smaller n must be a prefix of a larger one.
func TestLookupMatchesNaiveAndPrefix(t *testing.T) {
	for name, gen := range map[string]func(*rand.Rand, int) uint64{
		"random":    func(rng *rand.Rand, _ int) uint64 { return rng.Uint64() },
		"clustered": func(_ *rand.Rand, i int) uint64 { return uint64(i) * 7 }, // one crowded bucket
	} {
		t.Run(name, func(t *testing.T) { testLookupMatchesNaive(t, gen) })
	}
}

func testLookupMatchesNaive(t *testing.T, gen func(*rand.Rand, int) uint64) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ms []Member
	k := 0
	for i := range 8 {
		m := Member{ID: fmt.Sprintf("m%d", i)}
		for range 1 + i%3*5 { // uneven vnode counts: 1, 6, 11 tokens
			k++
			m.Tokens = append(m.Tokens, gen(rng, k))
		}
		ms = append(ms, m)
	}
	r, err := New(1, 3, ms)
	if err != nil {
		t.Fatal(err)
	}
	toks := []uint64{0, math.MaxUint64}
	for _, rg := range r.Ranges() {
		toks = append(toks, rg.End, rg.End+1, rg.End-1)
	}
	for range 200 {
		toks = append(toks, rng.Uint64())
	}
	for _, tok := range toks {
		all := ids(r.Lookup(tok, 8))
		if want := naiveLookup(r, tok, 8); !slices.Equal(all, want) {
			t.Fatalf("Lookup(%#x, 8) = %v, want %v", tok, all, want)
		}
		for n := 1; n <= 8; n++ {
			if got := ids(r.Lookup(tok, n)); !slices.Equal(got, all[:n]) {
				t.Fatalf("Lookup(%#x, %d) = %v, want prefix %v", tok, n, got, all[:n])
			}
		}
	}
}

func TestLookupIntoDoesNotAllocate(t *testing.T) {
	r := founderRing(t, 10, 64, 3)
	dst := make([]Member, 0, 3)
	tok := uint64(0x1234567890abcdef)
	allocs := testing.AllocsPerRun(100, func() {
		dst = r.LookupInto(tok, 3, dst)
		tok += 0x9e3779b97f4a7c15
	})
	if allocs != 0 {
		t.Errorf("LookupInto allocs = %v, want 0", allocs)
	}
}

func TestRangesAndOwnership(t *testing.T) {
	r := founderRing(t, 7, 16, 3)
	rs := r.Ranges()
	if got, want := len(rs), 7*16; got != want {
		t.Fatalf("len(Ranges) = %d, want %d", got, want)
	}
	sum := 0.0
	for i, rg := range rs {
		prev := rs[(i+len(rs)-1)%len(rs)]
		if rg.Start != prev.End {
			t.Errorf("range %d starts at %#x, want previous end %#x", i, rg.Start, prev.End)
		}
		if !rg.Contains(rg.End) || rg.Contains(rg.Start) {
			t.Errorf("range %v: Contains(End) or !Contains(Start) wrong", rg)
		}
		if got := r.RangeIndex(rg.End); got != i {
			t.Errorf("RangeIndex(%#x) = %d, want %d", rg.End, got, i)
		}
		sum += rg.Fraction()
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("sum of range fractions = %v, want 1", sum)
	}
	for name, tt := range map[string]struct {
		shares map[string]float64
		want   float64
	}{
		"Ownership":        {r.Ownership(), 1},
		"ReplicaOwnership": {r.ReplicaOwnership(), 3},
	} {
		total := 0.0
		for _, s := range tt.shares {
			total += s
		}
		if math.Abs(total-tt.want) > 1e-9 {
			t.Errorf("sum of %s = %v, want %v", name, total, tt.want)
		}
	}
}
