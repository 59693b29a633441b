package ring

import (
	"fmt"
	"testing"
)

func BenchmarkLookup(b *testing.B) {
	for _, nodes := range []int{3, 100} {
		r := founderRing(b, nodes, 256, 3)
		toks := keyTokens(1 << 16)
		b.Run(fmt.Sprintf("nodes=%d/vnodes=256/LookupInto", nodes), func(b *testing.B) {
			dst := make([]Member, 0, 3)
			i := 0
			for b.Loop() {
				dst = r.LookupInto(toks[i&(len(toks)-1)], 3, dst)
				i++
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/vnodes=256/Lookup", nodes), func(b *testing.B) {
			i := 0
			for b.Loop() {
				_ = r.Lookup(toks[i&(len(toks)-1)], 3)
				i++
			}
		})
	}
}

func BenchmarkWithMember(b *testing.B) {
	for _, nodes := range []int{10, 100} {
		r := founderRing(b, nodes, 256, 3)
		b.Run(fmt.Sprintf("nodes=%d/vnodes=256", nodes), func(b *testing.B) {
			for b.Loop() {
				if _, err := r.WithMember(Member{ID: "new"}, 256); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPlan(b *testing.B) {
	old := founderRing(b, 100, 256, 3)
	next, err := old.WithMember(Member{ID: "new"}, 256)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_ = Plan(old, next)
	}
}
