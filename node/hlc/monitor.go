package hlc

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Monitor estimates this node's clock offset to each peer from the RPCs they already
// exchange (CockroachDB's RemoteClockMonitor): a reply that carries the peer's wall clock,
// read between sending the request and receiving the reply, gives the offset within half the
// round trip. Safe for concurrent use.
type Monitor struct {
	maxOffset time.Duration
	now       func() time.Time

	mu    sync.Mutex
	peers map[string]Offset
}

// Offset is one peer's clock as this node last measured it.
type Offset struct {
	// Offset is the peer's clock minus this node's (positive: the peer is ahead).
	Offset time.Duration
	// Uncertainty is half the round trip of the measurement.
	Uncertainty time.Duration
	// At is when it was measured.
	At time.Time
}

// offsetTTL is how long a measurement counts.
const offsetTTL = 30 * time.Second

// NewMonitor returns a Monitor for the bound maxOffset (0: it never finds a fault); now nil
// means time.Now.
func NewMonitor(maxOffset time.Duration, now func() time.Time) *Monitor {
	if now == nil {
		now = time.Now
	}
	return &Monitor{maxOffset: maxOffset, now: now, peers: map[string]Offset{}}
}

// Observe records one measurement: the request to peer was sent at sent, its reply received
// at received, and the peer's wall clock was remote in between. It reports whether the offset
// is beyond half the bound (worth a warning).
func (m *Monitor) Observe(peer string, sent, received, remote time.Time) (warn bool) {
	rtt := received.Sub(sent)
	if rtt < 0 || remote.IsZero() {
		return false
	}
	o := Offset{Offset: remote.Sub(sent.Add(rtt / 2)), Uncertainty: rtt / 2, At: received}
	m.mu.Lock()
	m.peers[peer] = o
	m.mu.Unlock()
	return m.maxOffset > 0 && abs(o.Offset)-o.Uncertainty > m.maxOffset/2
}

// Offsets returns the current measurements by peer.
func (m *Monitor) Offsets() map[string]Offset {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	out := make(map[string]Offset, len(m.peers))
	for p, o := range m.peers {
		if now.Sub(o.At) <= offsetTTL {
			out[p] = o
		}
	}
	return out
}

// Check returns ErrClockOffset when this node's clock is off from a majority of the peers it
// has measured lately by more than the bound, even allowing for each measurement's
// uncertainty: then it is this node's clock that is wrong, and it must not stamp writes. A
// single peer far off says that peer's clock is wrong, not this one.
func (m *Monitor) Check() error {
	if m.maxOffset <= 0 {
		return nil
	}
	// Every write asks: read the measurements in place, not through a copy (Offsets).
	m.mu.Lock()
	now := m.now()
	counted := 0
	var far []time.Duration
	for _, o := range m.peers {
		if now.Sub(o.At) > offsetTTL {
			continue
		}
		counted++
		if abs(o.Offset)-o.Uncertainty > m.maxOffset {
			far = append(far, o.Offset)
		}
	}
	m.mu.Unlock()
	if 2*len(far) <= counted {
		return nil
	}
	slices.Sort(far)
	return fmt.Errorf("%w: this node's clock is %v off %d of %d peers (bound %v)",
		ErrClockOffset, (-far[len(far)/2]).Round(time.Millisecond), len(far), counted, m.maxOffset)
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
