package repair

import (
	"fmt"
	"testing"
)

// TestPulls: for each differing leaf, a replica outside a non-empty group of equal hashes
// pulls from that group's first replica, once; an empty leaf sends nothing.
func TestPulls(t *testing.T) {
	tree := func(leaves ...Leaf) *Tree { return &Tree{Depth: 4, Leaves: leaves} }
	cases := []struct {
		name  string
		trees []*Tree
		want  string
	}{
		{"one replica misses a key", []*Tree{tree(Leaf{3, 1, 7}), tree(Leaf{3, 1, 7}), tree()}, "[{2 0 [3]}]"},
		{"one replica holds a key alone", []*Tree{tree(), tree(Leaf{5, 1, 9}), tree()}, "[{0 1 [5]} {2 1 [5]}]"},
		{"three versions", []*Tree{tree(Leaf{1, 1, 1}), tree(Leaf{1, 1, 2}), tree(Leaf{1, 1, 2})},
			"[{0 1 [1]} {1 0 [1]} {2 0 [1]}]"},
		{"two leaves, two receivers", []*Tree{tree(Leaf{1, 1, 1}, Leaf{2, 1, 2}), tree(Leaf{2, 1, 2}), tree(Leaf{1, 1, 1})},
			"[{1 0 [1]} {2 0 [2]}]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			union := map[uint32]bool{}
			for a := range c.trees {
				for b := a + 1; b < len(c.trees); b++ {
					d, err := Diff(c.trees[a], c.trees[b])
					if err != nil {
						t.Fatal(err)
					}
					for _, l := range d {
						union[l.Index] = true
					}
				}
			}
			if got := fmt.Sprint(pulls(c.trees, union)); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
}
