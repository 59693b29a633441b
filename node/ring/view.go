package ring

// View is how a node routes while a ring change is in flight: reads go by Current; writes go to
// Current's replicas (natural) plus those of Next that are not among them (pending), and need
// ack + len(pending) acknowledgements (Cassandra's rule). Next is nil when no change is in flight.
// A View is immutable once published: swap the pointer, never the fields.
type View struct {
	Current, Next *Ring
	// Change is the id of the newest ring change begun (in flight when Next is set, committed
	// or aborted otherwise); 0 before the first change, and for a view not from the raft journal.
	Change uint64
}

// ViewID names the view a request was routed by. Views follow the raft journal: a change
// begins (its id, in flight), then either aborts (same epoch and id, settled) or commits (next
// epoch, settled); ids grow with every change begun. So ViewIDs are ordered, and a replica that
// has begun change 7 at epoch 4 knows that a write routed by {4, 6, settled} was not also sent
// to change 7's pending replicas.
type ViewID struct {
	Epoch, Change uint64
	// InFlight: change Change is in flight in this view.
	InFlight bool
}

// Less reports whether a is an older view than b.
func (a ViewID) Less(b ViewID) bool {
	switch {
	case a.Epoch != b.Epoch:
		return a.Epoch < b.Epoch
	case a.Change != b.Change:
		return a.Change < b.Change
	default:
		return a.InFlight && !b.InFlight // an abort follows its begin
	}
}

// ID is v's ViewID; the zero ViewID for a nil view or one without a current ring.
func (v *View) ID() ViewID {
	if v == nil || v.Current == nil {
		return ViewID{}
	}
	return ViewID{Epoch: v.Current.Epoch(), Change: v.Change, InFlight: v.Next != nil}
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
