package ring

import (
	"slices"
	"testing"
)

func TestView(t *testing.T) {
	cur := founderRing(t, 4, 16, 3)
	next, err := cur.WithMember(Member{ID: "new", State: StateJoining}, 16)
	if err != nil {
		t.Fatal(err)
	}
	steady := &View{Current: cur}
	changing := &View{Current: cur, Next: next}
	if steady.Changing() || !changing.Changing() {
		t.Errorf("Changing() = %v, %v; want false, true", steady.Changing(), changing.Changing())
	}
	sawPending := false
	for _, tok := range keyTokens(2000) {
		for from := 1; from <= 3; from++ {
			want := ids(cur.Lookup(tok, from))
			if got := ids(changing.ReadSet(tok, from)); !slices.Equal(got, want) {
				t.Fatalf("ReadSet(%#x, %d) = %v, want %v", tok, from, got, want)
			}
			nat, pend := steady.WriteSet(tok, from)
			if !slices.Equal(ids(nat), want) || pend != nil {
				t.Fatalf("steady WriteSet(%#x, %d) = %v, %v; want %v, nil", tok, from, ids(nat), ids(pend), want)
			}
			nat, pend = changing.WriteSet(tok, from)
			if !slices.Equal(ids(nat), want) {
				t.Fatalf("WriteSet natural = %v, want %v", ids(nat), want)
			}
			var wantPend []string
			for _, id := range ids(next.Lookup(tok, from)) {
				if !slices.Contains(want, id) {
					wantPend = append(wantPend, id)
				}
			}
			if got := ids(pend); !slices.Equal(got, wantPend) && len(got)+len(wantPend) > 0 {
				t.Fatalf("WriteSet pending = %v, want %v", got, wantPend)
			}
			sawPending = sawPending || len(pend) > 0
		}
	}
	if !sawPending {
		t.Errorf("no token had a pending replica, want some (the newcomer)")
	}
}

// TestViewWriteSetGrowingCluster: N=3 on two nodes grows to three. With the full from, every
// key's pending set includes the newcomer, which will replicate every key after the change.
func TestViewWriteSetGrowingCluster(t *testing.T) {
	two, err := New(1, 3, []Member{{ID: "a", Tokens: []uint64{100}}, {ID: "b", Tokens: []uint64{200}}})
	if err != nil {
		t.Fatal(err)
	}
	three, err := two.WithMember(Member{ID: "c", Tokens: []uint64{300}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := &View{Current: two, Next: three}
	for _, tok := range []uint64{50, 150, 250, 350} {
		nat, pend := v.WriteSet(tok, two.Replicas())
		if len(nat) != 2 || len(pend) != 1 || pend[0].ID != "c" {
			t.Errorf("WriteSet(%d, %d) = %v, %v; want both founders natural and c pending", tok, two.Replicas(), ids(nat), ids(pend))
		}
		// A smaller from stays a prefix: only the newcomer's place among the first one counts.
		_, pend = v.WriteSet(tok, 1)
		want := 0
		if three.Lookup(tok, 1)[0].ID == "c" {
			want = 1
		}
		if len(pend) != want {
			t.Errorf("WriteSet(%d, 1) pending = %v, want %d members", tok, ids(pend), want)
		}
	}
}
