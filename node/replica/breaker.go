package replica

import (
	"sync"
	"time"
)

// BreakerState is the state of a peer's circuit breaker.
type BreakerState string

// Breaker states.
const (
	// BreakerClosed lets every call through.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen fails calls fast until the cool-down has passed.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen has let one probe through and fails other calls fast
	// until the probe ends: success closes the breaker, failure reopens it.
	BreakerHalfOpen BreakerState = "half-open"
)

// Breaker is a snapshot of one peer's circuit breaker.
type Breaker struct {
	Peer                string
	State               BreakerState
	ConsecutiveFailures int
}

// breaker is one peer's circuit breaker. Safe for concurrent use.
//
// Closed: calls pass; K consecutive failures open it. Open: calls fail fast;
// the first call after the cool-down becomes the probe and the breaker turns
// half-open. Half-open: other calls fail fast; the probe's success closes
// the breaker, its failure reopens it for another cool-down, and a probe
// that ends neither way (abandoned by Close) leaves it open with the
// cool-down already passed, so the next call probes again.
type breaker struct {
	failures int           // K
	cooldown time.Duration // open -> half-open

	mu          sync.Mutex
	state       BreakerState
	consecutive int
	openedAt    time.Time
}

func newBreaker(failures int, cooldown time.Duration) *breaker {
	return &breaker{failures: failures, cooldown: cooldown, state: BreakerClosed}
}

// allow reports whether a call may go out now. A true answer in the open
// state makes the call the probe.
func (b *breaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerClosed:
		return true
	case BreakerOpen:
		if now.Sub(b.openedAt) < b.cooldown {
			return false
		}
		b.state = BreakerHalfOpen
		return true
	default: // half-open: the probe is out
		return false
	}
}

// success records a successful call: the breaker closes.
func (b *breaker) success() {
	b.mu.Lock()
	b.state = BreakerClosed
	b.consecutive = 0
	b.mu.Unlock()
}

// failure records a failed call (a timeout, an unreachable peer, an error).
func (b *breaker) failure(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.consecutive++
	switch b.state {
	case BreakerClosed:
		if b.consecutive >= b.failures {
			b.state = BreakerOpen
			b.openedAt = now
		}
	case BreakerHalfOpen:
		b.state = BreakerOpen
		b.openedAt = now
	}
}

// abandon records a call that ended neither in success nor in failure. A
// probe that is abandoned returns the breaker to open; the cool-down has
// passed, so the next call probes again.
func (b *breaker) abandon() {
	b.mu.Lock()
	if b.state == BreakerHalfOpen {
		b.state = BreakerOpen
	}
	b.mu.Unlock()
}

// snapshot returns the state for Breakers.
func (b *breaker) snapshot(peer string) Breaker {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Breaker{Peer: peer, State: b.state, ConsecutiveFailures: b.consecutive}
}

// closed reports whether the breaker is closed, for ordering replicas.
func (b *breaker) closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == BreakerClosed
}
