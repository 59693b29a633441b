package change

import (
	"strings"
	"testing"

	"ringkv/node/ring"
)

// TestWhyNoRebalance: a rebalance that moves nothing says exactly why.
func TestWhyNoRebalance(t *testing.T) {
	members := func(n int) []ring.Member {
		var ms []ring.Member
		for i := range n {
			id := string(rune('1' + i))
			ms = append(ms, ring.Member{ID: "n" + id, Addr: "a" + id, State: ring.StateUp, Weight: 1,
				Tokens: []uint64{uint64(i+1) << 56, uint64(i+1)<<56 + 1<<60}})
		}
		return ms
	}
	tests := []struct {
		name     string
		nodes    int
		replicas int
		load     map[string]float64
		want     string
	}{
		{"idle", 3, 3, map[string]float64{}, "no load measured over the last minute"},
		{"N = nodes", 3, 3, map[string]float64{"n1": 139, "n2": 80, "n3": 81}, "with 3 replicas on 3 nodes every node holds every key, so no vnode move changes any node's load"},
		{"within tolerance", 4, 2, map[string]float64{"n1": 105, "n2": 100, "n3": 97, "n4": 98}, "the most loaded node, n1, is 5% above the mean of 100 replica ops/s, within the 10% tolerance"},
		{"no move helps", 4, 2, map[string]float64{"n1": 160, "n2": 80, "n3": 80, "n4": 80}, "n1 is 60% above the mean of 100 replica ops/s, but no move of one of its vnodes lowers"},
	}
	for _, tt := range tests {
		r, err := ring.New(1, tt.replicas, members(tt.nodes))
		if err != nil {
			t.Fatal(err)
		}
		got := whyNoRebalance(r, tt.load, ring.DefaultRebalanceConfig())
		if !strings.HasPrefix(got, tt.want) || !strings.HasSuffix(got, "nothing to rebalance") && !strings.HasSuffix(got, "(add nodes to spread it)") {
			t.Errorf("%s: got %q, want it to start %q", tt.name, got, tt.want)
		}
	}
}
