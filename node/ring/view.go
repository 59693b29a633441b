package ring

// View is how a node routes while a ring change is in flight: reads go by Current; writes go to
// Current's replicas (natural) plus those of Next that are not among them (pending), and need
// ack + len(pending) acknowledgements (Cassandra's rule). Next is nil when no change is in flight.
// A View is immutable once published: swap the pointer, never the fields.
type View struct {
	Current, Next *Ring
}

// Changing reports whether a ring change is in flight.
func (v *View) Changing() bool { return v.Next != nil }

// ReadSet is the first from replicas of the token in the current ring.
func (v *View) ReadSet(token uint64, from int) []Member {
	return v.Current.Lookup(token, from)
}

// WriteSet returns the first from replicas of the token in the current ring (natural) and the
// members among the first from replicas in the next ring that are not natural ones (pending).
// A from that asks for every replica the current ring has (its Replicas(), capped by its size)
// asks for every replica of the next ring too: when a cluster smaller than N grows, the next
// ring has more replicas per key, and the newcomer must receive writes for all the keys it will
// hold after the change.
func (v *View) WriteSet(token uint64, from int) (natural, pending []Member) {
	natural = v.Current.Lookup(token, from)
	if v.Next == nil {
		return natural, nil
	}
	nextFrom := from
	if from >= v.Current.Replicas() {
		nextFrom = max(from, v.Next.Replicas())
	}
	for _, m := range v.Next.Lookup(token, nextFrom) {
		if !isIn(natural, m.ID) {
			pending = append(pending, m)
		}
	}
	return natural, pending
}

func isIn(ms []Member, id string) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}
