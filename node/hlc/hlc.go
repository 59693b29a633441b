// Package hlc is a hybrid logical clock: timestamps that follow the wall clock
// in milliseconds but never repeat or go backwards on one clock, and that move
// past any timestamp merged in from a peer.
//
// A timestamp is a uint64: physical unix milliseconds << 16 | a 16-bit logical
// counter. The logical counter orders events within one millisecond, and keeps
// Now strictly increasing while the wall clock stands still or runs backwards.
// If more than 65536 events fall into one millisecond the counter carries into
// the physical part: the clock runs slightly ahead of the wall clock until the
// wall clock catches up. Timestamps compare as plain integers.
package hlc

import (
	"sync/atomic"
	"time"
)

// logicalBits is the width of the logical counter in a timestamp.
const logicalBits = 16

// Clock issues hybrid logical timestamps. It is safe for concurrent use.
type Clock struct {
	now  func() time.Time
	last atomic.Uint64 // highest timestamp issued or merged
}

// New returns a Clock that reads physical time from now; nil now means time.Now.
func New(now func() time.Time) *Clock {
	if now == nil {
		now = time.Now
	}
	return &Clock{now: now}
}

// Now returns a timestamp greater than every timestamp this clock returned
// before and every timestamp passed to Update.
func (c *Clock) Now() uint64 {
	phys := physicalTS(c.now())
	for {
		last := c.last.Load()
		next := last + 1
		if phys > last {
			next = phys
		}
		if c.last.CompareAndSwap(last, next) {
			return next
		}
	}
}

// Update merges a timestamp seen from a peer, so that every later Now is
// greater than remote.
func (c *Clock) Update(remote uint64) {
	for {
		last := c.last.Load()
		if remote <= last || c.last.CompareAndSwap(last, remote) {
			return
		}
	}
}

// Physical returns the wall-clock part of ts, at millisecond precision.
func Physical(ts uint64) time.Time {
	return time.UnixMilli(int64(ts >> logicalBits))
}

// physicalTS converts a wall-clock time into a timestamp with a zero logical
// counter. Times before 1970 count as 0.
func physicalTS(t time.Time) uint64 {
	ms := t.UnixMilli()
	if ms < 0 {
		return 0
	}
	return uint64(ms) << logicalBits
}
