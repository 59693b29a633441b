package replica

import (
	"sync"
	"time"

	"ringkv/proto/kvpb"
)

// BreakerState is the state of a peer's circuit breaker.
type BreakerState string

// Breaker states.
const (
	// BreakerClosed lets every call through.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen skips the peer while the other replicas can reach ack without
	// it; when they cannot, calls still go out (see Coordinator). A background
	// probe, or the peer's connection turning ready, closes it.
	BreakerOpen BreakerState = "open"
)

// Proto is s on the wire.
func (s BreakerState) Proto() kvpb.BreakerState_State {
	switch s {
	case BreakerClosed:
		return kvpb.BreakerState_CLOSED
	case BreakerOpen:
		return kvpb.BreakerState_OPEN
	}
	return kvpb.BreakerState_STATE_UNSPECIFIED
}

// Breaker is a snapshot of one peer's circuit breaker.
type Breaker struct {
	Peer                string
	State               BreakerState
	ConsecutiveFailures int
	// Reason is the last failure that counted towards opening the breaker
	// (empty while closed with no failures).
	Reason string
	// Since is when the breaker opened (zero while closed).
	Since time.Time
}

// breaker is one peer's circuit breaker. Safe for concurrent use.
//
// It opens on evidence that the peer is dead, not merely slow: K consecutive
// failures of which the last was a dead one (connection refused or reset, no
// connection: the peer is not there), or K consecutive deadline misses that
// span at least slowSpell (a machine that is busy for a moment is not a dead
// node). Any success closes it, and so does a sign of life from the
// transport: the peer's connection turning ready or a background probe
// answering (reachable). There is no half-open state: no client request is
// ever the probe.
type breaker struct {
	failures  int           // K
	slowSpell time.Duration // how long K deadline misses must span to open it

	mu          sync.Mutex
	state       BreakerState
	consecutive int
	streakStart time.Time // first failure of the current streak
	openedAt    time.Time
	reason      string
	opens       uint64 // how many times it opened: the epoch of a sign of life (reachable)
}

func newBreaker(failures int, slowSpell time.Duration) *breaker {
	return &breaker{failures: failures, slowSpell: slowSpell, state: BreakerClosed}
}

// allow reports whether the breaker is closed: calls to the peer go out
// without question. A false answer lets the caller skip the peer when it can
// do without it.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == BreakerClosed
}

// success records a successful call: the breaker closes.
func (b *breaker) success() {
	b.mu.Lock()
	b.close()
	b.mu.Unlock()
}

// close closes the breaker and forgets the failures; b.mu is held.
func (b *breaker) close() {
	b.state = BreakerClosed
	b.consecutive = 0
	b.reason = ""
	b.openedAt = time.Time{}
}

// epoch returns how many times the breaker has opened. Read it before looking for a
// sign of life (the connection's state, a probe) and hand it to reachable.
func (b *breaker) epoch() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opens
}

// reachable records a sign of life from the transport (the connection turned ready, or a
// probe answered), seen after epoch returned seen: the breaker closes, as on a success,
// unless it opened again since. A connection read READY, or a probe answered, just before
// the peer stopped is older than the failures that opened the breaker, and must not
// close it. It reports whether the breaker closed.
func (b *breaker) reachable(seen uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.opens != seen || b.state == BreakerClosed {
		return false
	}
	b.close()
	return true
}

// failure records a failed call. dead is true when the failure shows the peer
// is not there (refused, reset, no connection) and false for a deadline miss
// or another error; reason is one line for Breaker.Reason. It reports whether
// the breaker opened on this failure.
func (b *breaker) failure(now time.Time, dead bool, reason string) (opened bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.consecutive == 0 {
		b.streakStart = now
	}
	b.consecutive++
	b.reason = reason
	if b.state == BreakerOpen {
		return false
	}
	if b.consecutive >= b.failures && (dead || now.Sub(b.streakStart) >= b.slowSpell) {
		b.state = BreakerOpen
		b.openedAt = now
		b.opens++
		return true
	}
	return false
}

// snapshot returns the state for Breakers.
func (b *breaker) snapshot(peer string) Breaker {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Breaker{Peer: peer, State: b.state, ConsecutiveFailures: b.consecutive, Reason: b.reason, Since: b.openedAt}
}
