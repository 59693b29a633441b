package replica

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"ringkv/node/ring"
)

// MaxKeySize is the longest key a node accepts, in bytes (SPEC.md).
const MaxKeySize = 1 << 10

// Config tunes a Coordinator. A zero field means its default (DefaultConfig).
type Config struct {
	// ReplicaTimeout is the per-replica deadline: replica calls of one
	// operation must end within it, counted from the operation's start. A
	// call that exceeds it counts as a failure for the peer's breaker.
	ReplicaTimeout time.Duration
	// HedgeMin and HedgeMax clamp the hedge delay of reads: how long the
	// coordinator waits for the first ack replicas before asking the rest.
	// Between the bounds the delay follows the observed p99 of replica reads.
	HedgeMin, HedgeMax time.Duration
	// NoHedge asks every replica of a read at once instead of ack first.
	NoHedge bool
	// BreakerFailures is K: a peer's breaker opens after K consecutive
	// failures that show it is dead (refused, reset, unreachable), or after K
	// consecutive deadline misses that span at least BreakerSlowSpell.
	BreakerFailures int
	// BreakerSlowSpell is how long a streak of deadline misses must last
	// before it opens a breaker: a node that is slow because the machine is
	// busy for a moment is not a dead node.
	BreakerSlowSpell time.Duration
	// ProbeInterval is how often a peer whose breaker is open is probed in
	// the background (its connection woken and a health check sent), so that
	// no client request has to be the probe. ProbeTimeout bounds one probe.
	ProbeInterval, ProbeTimeout time.Duration
	// HealthInterval is how often a peer whose breaker is closed is probed all the
	// same, so that Unreachable sees a peer behind a silent partition.
	HealthInterval time.Duration
	// ReconcileWorkers bounds the read reconciliations written concurrently;
	// ReconcileQueue bounds those waiting. Those beyond the queue are dropped
	// (the next read of the key finds the replica stale again).
	ReconcileWorkers, ReconcileQueue int
	// MaxKeyBytes and MaxValueBytes limit the size of keys and values
	// (defaults MaxKeySize and 1 MiB). The Coordinator checks them, with the
	// request's ack and from, once per request: the front ends do not.
	MaxKeyBytes, MaxValueBytes int
	// Now is the clock of the breakers; nil means time.Now. Tests inject one.
	Now func() time.Time
	// ClockCheck, when set, is asked before every write: an error (hlc.ErrClockOffset, from
	// hlc.Monitor.Check: this node's clock is off from most peers) refuses the write rather
	// than stamp it with a timestamp the replicas would refuse or, worse, one from the future.
	ClockCheck func() error
	// Logger, when set, logs a peer's breaker closing on a sign of life.
	Logger *slog.Logger
	// Hints is where hints are kept (hinted handoff, see hints.go): the node's durable
	// hints.Log, bounded by its own config (bytes, age), which its owner opens and closes
	// after the Coordinator. Nil: no hints.
	Hints HintLog
	// HintInterval is how often hints are handed over to peers that answer again (besides
	// at once when a peer's breaker closes) and expired hints dropped.
	HintInterval time.Duration
	// HintRate paces the handoff, in bytes per second of keys and values, so a backlog does
	// not crowd out client traffic. Negative: unpaced.
	HintRate int64
	// CatchUp, when set, waits until this node's ring view is newer than stale
	// (cluster.Cluster.WaitView of the next view). A write refused by a replica
	// with ErrStaleView waits for it, bounded by ReplicaTimeout, and is sent
	// once more by the newer view. Nil: such a write fails.
	CatchUp func(ctx context.Context, stale ring.ViewID) error
	// Writable, when set, is nil while this node may take writes; else (its disk is full:
	// store.ErrDiskFull) the coordinator refuses every write with that error before calling
	// any replica, so neither its store nor its hints grow. Reads go on.
	Writable func() error
	// Keys, when set, is told of every client operation with its key (KeyObserver).
	Keys KeyObserver
	// Calls, when set, is told of every call to a peer replica, every hedged read and every
	// breaker that opens (CallObserver).
	Calls CallObserver
	// LinkCounts, when set, returns the TCP segments this node sent to a peer's address and
	// how many of them it retransmitted, since start (tcpinfo.Tracker.Counts): lost packets,
	// for the gray failure verdict (gray.go). Must be safe for concurrent use.
	LinkCounts func(addr string) (segments, retransmits uint64)
	// ClientCounts, when set, returns the same of this node's client connections: a node
	// whose clients lose packets while the others' do not is gray. Safe for concurrent use.
	ClientCounts func() (segments, retransmits uint64)
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		ReplicaTimeout:   time.Second,
		HedgeMin:         2 * time.Millisecond,
		HedgeMax:         200 * time.Millisecond,
		BreakerFailures:  5,
		BreakerSlowSpell: 3 * time.Second,
		ProbeInterval:    200 * time.Millisecond,
		ProbeTimeout:     time.Second,
		HealthInterval:   time.Second,
		ReconcileWorkers: 4,
		ReconcileQueue:   1024,
		MaxKeyBytes:      MaxKeySize,
		MaxValueBytes:    1 << 20,
		HintInterval:     time.Second,
		HintRate:         4 << 20,
		Now:              time.Now,
	}
}

// Validate reports the first problem with c, wrapping ErrInvalidArgument.
// Zero fields are valid: they mean the default.
func (c Config) Validate() error {
	switch {
	case c.ReplicaTimeout < 0:
		return fmt.Errorf("%w: replica timeout %v is negative", ErrInvalidArgument, c.ReplicaTimeout)
	case c.HedgeMin < 0 || c.HedgeMax < 0:
		return fmt.Errorf("%w: hedge bounds %v..%v are negative", ErrInvalidArgument, c.HedgeMin, c.HedgeMax)
	case c.HedgeMax != 0 && c.HedgeMin > c.HedgeMax:
		return fmt.Errorf("%w: hedge min %v exceeds hedge max %v", ErrInvalidArgument, c.HedgeMin, c.HedgeMax)
	case c.BreakerFailures < 0:
		return fmt.Errorf("%w: breaker failures %d is negative", ErrInvalidArgument, c.BreakerFailures)
	case c.BreakerSlowSpell < 0:
		return fmt.Errorf("%w: breaker slow spell %v is negative", ErrInvalidArgument, c.BreakerSlowSpell)
	case c.ProbeInterval < 0 || c.ProbeTimeout < 0 || c.HealthInterval < 0:
		return fmt.Errorf("%w: probe interval %v / timeout %v are negative", ErrInvalidArgument, c.ProbeInterval, c.ProbeTimeout)
	case c.ReconcileWorkers < 0 || c.ReconcileQueue < 0:
		return fmt.Errorf("%w: reconcile workers %d / queue %d are negative", ErrInvalidArgument, c.ReconcileWorkers, c.ReconcileQueue)
	case c.MaxKeyBytes < 0 || c.MaxValueBytes < 0:
		return fmt.Errorf("%w: size limits %d / %d are negative", ErrInvalidArgument, c.MaxKeyBytes, c.MaxValueBytes)
	case c.HintInterval < 0:
		return fmt.Errorf("%w: hint interval %v is negative", ErrInvalidArgument, c.HintInterval)
	}
	return nil
}

// withDefaults fills the zero fields of c from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.ReplicaTimeout <= 0 {
		c.ReplicaTimeout = d.ReplicaTimeout
	}
	if c.HedgeMin <= 0 {
		c.HedgeMin = d.HedgeMin
	}
	if c.HedgeMax <= 0 {
		c.HedgeMax = max(d.HedgeMax, c.HedgeMin)
	}
	if c.BreakerFailures <= 0 {
		c.BreakerFailures = d.BreakerFailures
	}
	if c.BreakerSlowSpell <= 0 {
		c.BreakerSlowSpell = d.BreakerSlowSpell
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = d.ProbeInterval
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = d.ProbeTimeout
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = d.HealthInterval
	}
	if c.ReconcileWorkers <= 0 {
		c.ReconcileWorkers = d.ReconcileWorkers
	}
	if c.ReconcileQueue <= 0 {
		c.ReconcileQueue = d.ReconcileQueue
	}
	if c.MaxKeyBytes <= 0 {
		c.MaxKeyBytes = d.MaxKeyBytes
	}
	if c.MaxValueBytes <= 0 {
		c.MaxValueBytes = d.MaxValueBytes
	}
	if c.HintInterval <= 0 {
		c.HintInterval = d.HintInterval
	}
	if c.HintRate == 0 {
		c.HintRate = d.HintRate
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	return c
}
