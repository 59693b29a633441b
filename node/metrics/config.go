package metrics

import (
	"fmt"
	"time"

	"ringkv/node/hints"
	"ringkv/node/ring"
)

// RangeCounter is what the Registry needs from the store (node/store.Store implements it).
// Both methods must be safe for concurrent use; they are called from Run and Snapshot, never
// on the request path.
type RangeCounter interface {
	// CountRange counts the records with a token in (start, end] and their bytes.
	CountRange(start, end uint64) (keys, bytes uint64, err error)
	// Size returns the LSM and value-log sizes in bytes.
	Size() (lsm, vlog int64)
	// KeyCount returns the number of records stored (exact, kept by the store).
	KeyCount() int64
}

// Config configures a Registry. Every func field may be nil (the numbers it feeds stay zero).
type Config struct {
	// ID is this node's name; it fills NodeStats.id and picks the vnodes this node replicates.
	ID string
	// Ring returns the ring the node routes by; nil until the node is admitted. It is called
	// on the request path (ObserveVnode), so it must be cheap (an atomic load).
	Ring func() *ring.Ring
	// Store is the node's store; nil = no key counts or disk use.
	Store RangeCounter
	// Hints returns the hint queues (hints.Log.Queues) for /metrics: per peer, hints queued
	// and their bytes, hints delivered and dropped.
	Hints func() []hints.Queue
	// ClockRejected returns how many timestamps were refused for being too far ahead of this
	// node's clock (hlc.Clock.Rejected); ClockOffsets this node's clock offset to each peer it
	// measured lately (hlc.Monitor). Either may be nil.
	ClockRejected func() uint64
	ClockOffsets  func() map[string]time.Duration
	// Batches returns how many batch messages this node sent to its peers' Replica service
	// and how many reads and writes they carried (replica.BatchCounts.Load).
	Batches func() (messages, items uint64)
	// ErrorKind classifies an operation error into one of ErrorKinds; nil = DefaultErrorKind.
	ErrorKind func(error) string
	// Tick is how often Run decays the rates. Default 1s.
	Tick time.Duration
	// LatencyWindow is how far back the latency quantiles look (they are kept in two halves
	// rotated every LatencyWindow/2). Default 10s.
	LatencyWindow time.Duration
	// CountInterval is how often Run refreshes the per-vnode key counts. Default 30s.
	// The node's total key count does not wait for it: it comes from Store.KeyCount.
	CountInterval time.Duration
	// LoadWindow is the time constant of the slow rates ("_1m" fields: per-vnode load, the
	// rebalance planner's input). Default 1 min; tests shorten it to reach a steady load sooner.
	LoadWindow time.Duration
	// VnodeMetrics exports one Prometheus series per vnode (reads, writes, keys, bytes).
	// Off by default: a cluster has thousands of vnodes; the default export is a summary family.
	VnodeMetrics bool
}

// DefaultConfig returns a Config with the default periods.
func DefaultConfig() Config {
	return Config{
		Tick:          time.Second,
		LatencyWindow: 10 * time.Second,
		CountInterval: 30 * time.Second,
		LoadWindow:    time.Minute,
	}
}

// Validate checks the periods.
func (c Config) Validate() error {
	switch {
	case c.Tick <= 0:
		return fmt.Errorf("%w: tick %v: want > 0", ErrInvalidConfig, c.Tick)
	case c.LatencyWindow < 2*c.Tick:
		return fmt.Errorf("%w: latency window %v: want >= 2 ticks", ErrInvalidConfig, c.LatencyWindow)
	case c.CountInterval <= 0:
		return fmt.Errorf("%w: count interval %v: want > 0", ErrInvalidConfig, c.CountInterval)
	}
	return nil
}
