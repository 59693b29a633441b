package change

import (
	"fmt"
	"strings"
	"testing"

	"ringkv/node/ring"
)

func testRing(t *testing.T, n int) *ring.Ring {
	t.Helper()
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("n%d", i+1))
	}
	tokens := ring.FounderTokens(ids, 8)
	var members []ring.Member
	for _, id := range ids {
		members = append(members, ring.Member{ID: id, Addr: id + ":1", State: ring.StateUp, Weight: 1, Tokens: tokens[id]})
	}
	r, err := ring.New(1, 3, members)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLiveCopies: removing a dead node, each move's data must come from a live replica; the
// plan names the ranges none holds and those whose receiver is down, and nothing else.
func TestLiveCopies(t *testing.T) {
	cur := testRing(t, 7)
	next, err := cur.WithoutMember("n4")
	if err != nil {
		t.Fatal(err)
	}
	moves := ring.Plan(cur, next)
	tests := []struct {
		name             string
		dead             []string
		lost, unreceived bool
	}{
		{"the removed node alone is dead", []string{"n4"}, false, false},
		{"a second node is dead", []string{"n4", "n5"}, false, true},
		{"three nodes are dead", []string{"n4", "n5", "n6"}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dead := map[string]bool{}
			for _, id := range tt.dead {
				dead[id] = true
			}
			cp := liveCopies(cur, moves, dead)
			if got := len(cp.lost) > 0; got != tt.lost {
				t.Errorf("got %d moves without a live copy, want some: %t", len(cp.lost), tt.lost)
			}
			if got := len(cp.unreceived) > 0; got != tt.unreceived {
				t.Errorf("got %d moves to a dead receiver, want some: %t", len(cp.unreceived), tt.unreceived)
			}
			for _, mv := range cp.lost {
				for _, id := range candidates(cur, mv) {
					if !dead[id] {
						t.Errorf("move %s: counted lost, but %s holds it and is live", mv, id)
					}
				}
			}
			refusals := strings.Join(cp.refusals(), "; ")
			for _, mv := range append(cp.lost, cp.unreceived...)[:min(3, len(cp.lost)+len(cp.unreceived))] {
				if !strings.Contains(refusals, ring.FormatRange(mv.Start, mv.End)) {
					t.Errorf("refusals %q do not name %s", refusals, ring.FormatRange(mv.Start, mv.End))
				}
			}
		})
	}
}

// TestRemaining: a move in flight never reads complete, and an estimate its pull outgrew is
// replaced by the receiver's, never left below what was pulled.
func TestRemaining(t *testing.T) {
	tests := []struct {
		name              string
		est, byPosition   rangeCount
		keys, bytes       uint64
		wantKeys, wantByt uint64
	}{
		{"below the estimate", rangeCount{100, 1000}, rangeCount{}, 40, 400, 100, 1000},
		{"no estimate", rangeCount{}, rangeCount{}, 0, 0, 1, 1},
		{"estimate reached", rangeCount{100, 1000}, rangeCount{}, 100, 1000, 101, 1001},
		{"estimate outgrown, position known", rangeCount{100, 1000}, rangeCount{160, 1600}, 120, 1200, 160, 1600},
	}
	for _, tt := range tests {
		got := remaining(tt.est, tt.byPosition, tt.keys, tt.bytes)
		if got.keys != tt.wantKeys || got.bytes != tt.wantByt {
			t.Errorf("%s: got %d keys %d bytes, want %d, %d", tt.name, got.keys, got.bytes, tt.wantKeys, tt.wantByt)
		}
		if got.keys <= tt.keys || got.bytes <= tt.bytes {
			t.Errorf("%s: got total %d/%d, not above what was pulled %d/%d", tt.name, got.keys, got.bytes, tt.keys, tt.bytes)
		}
	}
}
