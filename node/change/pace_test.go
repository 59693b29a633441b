package change_test

import (
	"testing"

	"ringkv/node/change"
	"ringkv/node/ring"
)

// TestPendingReplicas: while a node is added, a write waits for one pending replica beyond
// its ack (the newcomer); with no change in flight, for none.
func TestPendingReplicas(t *testing.T) {
	ids := []string{"n1", "n2", "n3"}
	tokens := ring.FounderTokens(ids, 16)
	var ms []ring.Member
	for _, id := range ids {
		ms = append(ms, ring.Member{ID: id, Addr: id + ":1", Tokens: tokens[id]})
	}
	cur, err := ring.New(1, 3, ms)
	if err != nil {
		t.Fatal(err)
	}
	next, err := cur.WithMember(ring.Member{ID: "n4", Addr: "n4:1"}, 16)
	if err != nil {
		t.Fatal(err)
	}
	if got := change.PendingReplicas(&ring.View{Current: cur, Next: next}); got != 1 {
		t.Errorf("adding n4: got %d pending replicas, want 1", got)
	}
	if got := change.PendingReplicas(&ring.View{Current: cur}); got != 0 {
		t.Errorf("no change: got %d pending replicas, want 0", got)
	}
}
