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
	"fmt"
	"sync/atomic"
	"time"

	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// ErrClockOffset is a timestamp, or a clock, further from this node's clock than the
// bound (MaxOffset): it is refused, never adopted.
var ErrClockOffset = rpcerr.New(kvpb.Reason_REASON_CLOCK_OFFSET, "clock offset beyond the bound")

// logicalBits is the width of the logical counter in a timestamp.
const logicalBits = kvpb.TimestampLogicalBits

// Clock issues hybrid logical timestamps. It is safe for concurrent use.
type Clock struct {
	now       func() time.Time
	maxOffset time.Duration // 0: unbounded
	last      atomic.Uint64 // highest timestamp issued or merged
	rejected  atomic.Uint64
}

// Option adjusts New.
type Option func(*Clock)

// MaxOffset bounds how far ahead of this clock a timestamp from elsewhere may be (CockroachDB's
// --max-offset): Check refuses one further ahead, and Update never adopts it. 0 = unbounded.
func MaxOffset(d time.Duration) Option { return func(c *Clock) { c.maxOffset = d } }

// New returns a Clock that reads physical time from now; nil now means time.Now.
func New(now func() time.Time, opts ...Option) *Clock {
	if now == nil {
		now = time.Now
	}
	c := &Clock{now: now}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Check returns ErrClockOffset, and counts it, when remote is further ahead of this clock's
// physical time than MaxOffset.
func (c *Clock) Check(remote uint64) error {
	if c.maxOffset <= 0 {
		return nil
	}
	wall := c.now()
	if ahead := Physical(remote).Sub(wall); ahead > c.maxOffset {
		c.rejected.Add(1)
		return fmt.Errorf("%w: timestamp %s is %v ahead of this node's clock (bound %v)",
			ErrClockOffset, kvpb.TimestampString(remote), ahead.Round(time.Millisecond), c.maxOffset)
	}
	return nil
}

// Rejected returns how many timestamps Check has refused.
func (c *Clock) Rejected() uint64 { return c.rejected.Load() }

// MaxOffset returns the bound (0 = unbounded).
func (c *Clock) MaxOffset() time.Duration { return c.maxOffset }

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
// greater than remote — unless Check refuses it: then the clock stays as it
// was and the error is returned.
func (c *Clock) Update(remote uint64) error {
	if err := c.Check(remote); err != nil {
		return err
	}
	for {
		last := c.last.Load()
		if remote <= last || c.last.CompareAndSwap(last, remote) {
			return nil
		}
	}
}

// Physical returns the wall-clock part of ts, at millisecond precision.
func Physical(ts uint64) time.Time { return kvpb.WallTime(ts) }

// physicalTS converts a wall-clock time into a timestamp with a zero logical
// counter. Times before 1970 count as 0.
func physicalTS(t time.Time) uint64 {
	ms := t.UnixMilli()
	if ms < 0 {
		return 0
	}
	return uint64(ms) << logicalBits
}

// Since returns the smallest timestamp stamped at or after wall-clock time t (its physical
// part, logical counter 0): every timestamp below it was stamped before t.
func Since(t time.Time) uint64 { return physicalTS(t) }
