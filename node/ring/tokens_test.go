package ring

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
)

// maxOverMean is max/mean of the shares.
func maxOverMean(shares map[string]float64) float64 {
	var sum, mx float64
	for _, s := range shares {
		sum += s
		mx = max(mx, s)
	}
	return mx / (sum / float64(len(shares)))
}

func TestFounderTokensDeterministic(t *testing.T) {
	a := FounderTokens([]string{"x", "y", "z", "w"}, 32)
	b := FounderTokens([]string{"z", "w", "y", "x", "x", ""}, 32)
	if !maps.EqualFunc(a, b, slices.Equal[[]uint64]) {
		t.Errorf("FounderTokens differs with the order of ids")
	}
	if got, want := len(a), 4; got != want {
		t.Errorf("members = %d, want %d", got, want)
	}
	for id, toks := range a {
		if got, want := len(toks), 32; got != want {
			t.Errorf("%s has %d tokens, want %d", id, got, want)
		}
	}
	if got := FounderTokens(nil, 8); len(got) != 0 {
		t.Errorf("FounderTokens(nil) = %v, want empty", got)
	}
	if got, want := len(FounderTokens([]string{"a"}, 0)["a"]), DefaultVnodes; got != want {
		t.Errorf("vnodes 0: got %d tokens, want DefaultVnodes %d", got, want)
	}
}

func TestFounderTokensBalance(t *testing.T) {
	worstP, worstR := 0.0, 0.0
	for n := 3; n <= 50; n++ {
		r := founderRing(t, n, DefaultVnodes, 3)
		p, rep := maxOverMean(r.Ownership()), maxOverMean(r.ReplicaOwnership())
		worstP, worstR = max(worstP, p), max(worstR, rep)
		if p > 1.05 {
			t.Errorf("n=%d: primary max/mean = %.4f, want <= 1.05", n, p)
		}
		// Replica shares are not what FounderTokens levels, but must stay sane.
		if rep > 1.15 {
			t.Errorf("n=%d: replica max/mean = %.4f, want <= 1.15", n, rep)
		}
		// No member follows itself.
		rs := r.Ranges()
		for i, rg := range rs {
			if next := rs[(i+1)%len(rs)]; next.Owner == rg.Owner {
				t.Errorf("n=%d: %s owns two adjacent vnodes at %d", n, rg.Owner, i)
				break
			}
		}
	}
	t.Logf("founders n=3..50, V=%d: worst primary max/mean %.4f, worst replica (N=3) max/mean %.4f", DefaultVnodes, worstP, worstR)
}

func TestWithMemberBalance(t *testing.T) {
	for _, tt := range []struct{ n, vnodes, replicas int }{
		{1, DefaultVnodes, 3}, {2, DefaultVnodes, 3}, {3, DefaultVnodes, 3}, {4, DefaultVnodes, 3},
		{10, DefaultVnodes, 3}, {20, DefaultVnodes, 3}, {10, 256, 3}, {100, 256, 3}, {5, DefaultVnodes, 1},
	} {
		t.Run(fmt.Sprintf("n=%d/V=%d/N=%d", tt.n, tt.vnodes, tt.replicas), func(t *testing.T) {
			old := founderRing(t, tt.n, tt.vnodes, tt.replicas)
			next, err := old.WithMember(Member{ID: "new", Addr: "new:9090", State: StateJoining}, tt.vnodes)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := next.Epoch(), old.Epoch()+1; got != want {
				t.Errorf("epoch = %d, want %d", got, want)
			}
			m, ok := next.Member("new")
			if !ok || len(m.Tokens) != tt.vnodes || m.State != StateJoining {
				t.Fatalf("newcomer = %+v, want %d tokens, JOINING", m, tt.vnodes)
			}
			for _, o := range old.Members() {
				nm, _ := next.Member(o.ID)
				if !slices.Equal(nm.Tokens, o.Tokens) {
					t.Errorf("%s tokens changed", o.ID)
				}
			}
			p, rep := maxOverMean(next.Ownership()), maxOverMean(next.ReplicaOwnership())
			t.Logf("after adding to %d: primary max/mean %.4f (new %.4f, ideal %.4f), replica max/mean %.4f (new %.4f, ideal %.4f)",
				tt.n, p, next.Ownership()["new"], 1/float64(tt.n+1),
				rep, next.ReplicaOwnership()["new"], float64(next.Replicas())/float64(tt.n+1))
			if p > 1.10 {
				t.Errorf("primary max/mean = %.4f, want <= 1.10", p)
			}
			if rep > 1.10 {
				t.Errorf("replica max/mean = %.4f, want <= 1.10", rep)
			}
		})
	}
}

func TestWithMemberErrors(t *testing.T) {
	r := founderRing(t, 3, 8, 3)
	tests := []struct {
		name   string
		m      Member
		vnodes int
		want   error
	}{
		{"existing id", Member{ID: "n00"}, 8, ErrDuplicateMember},
		{"no vnodes", Member{ID: "x"}, 0, ErrInvalidVnodes},
		{"empty id", Member{ID: ""}, 8, ErrInvalidMember},
		{"token taken", Member{ID: "x", Tokens: []uint64{r.Ranges()[0].End}}, 0, ErrDuplicateToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := r.WithMember(tt.m, tt.vnodes); !errors.Is(err, tt.want) {
				t.Errorf("got error %v, want %v", err, tt.want)
			}
		})
	}
	next, err := r.WithMember(Member{ID: "x", Tokens: []uint64{7, 8}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := next.Member("x"); !slices.Equal(m.Tokens, []uint64{7, 8}) {
		t.Errorf("explicit tokens = %v, want [7 8]", m.Tokens)
	}
}

func TestWithoutMember(t *testing.T) {
	old := founderRing(t, 5, 16, 3)
	next, err := old.WithoutMember("n02")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := next.Epoch(), old.Epoch()+1; got != want {
		t.Errorf("epoch = %d, want %d", got, want)
	}
	if _, ok := next.Member("n02"); ok {
		t.Errorf("n02 still a member")
	}
	if got, want := next.Vnodes(), old.Vnodes()-16; got != want {
		t.Errorf("vnodes = %d, want %d", got, want)
	}
	// Each of n02's ranges falls to the clockwise successor that is not n02.
	rs := old.Ranges()
	for i, rg := range rs {
		if rg.Owner != "n02" {
			continue
		}
		want := ""
		for k := 1; want == ""; k++ {
			if o := rs[(i+k)%len(rs)].Owner; o != "n02" {
				want = o
			}
		}
		if got := next.Lookup(rg.End, 1)[0].ID; got != want {
			t.Errorf("range %v now owned by %s, want %s", rg, got, want)
		}
	}
	if _, err := old.WithoutMember("nope"); !errors.Is(err, ErrUnknownMember) {
		t.Errorf("unknown member: got %v, want %v", err, ErrUnknownMember)
	}
	solo := founderRing(t, 1, 4, 3)
	if _, err := solo.WithoutMember("n00"); !errors.Is(err, ErrLastMember) {
		t.Errorf("last member: got %v, want %v", err, ErrLastMember)
	}
}

func TestWithState(t *testing.T) {
	r := founderRing(t, 3, 4, 3)
	next, err := r.WithState("n01", StateDown)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := next.Member("n01"); m.State != StateDown {
		t.Errorf("state = %q, want DOWN", m.State)
	}
	if got, want := next.Epoch(), r.Epoch()+1; got != want {
		t.Errorf("epoch = %d, want %d", got, want)
	}
	if _, err := r.WithState("n01", "ASLEEP"); !errors.Is(err, ErrInvalidMember) {
		t.Errorf("bad state: got %v, want %v", err, ErrInvalidMember)
	}
}
