package store

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Config configures a Store.
type Config struct {
	// Dir is the badger directory. Ignored when InMemory is set.
	Dir string
	// InMemory keeps everything in memory; nothing survives Close.
	InMemory bool
	// SyncWrites makes every Apply fsync before it returns (badger's
	// SyncWrites). See the package comment for what survives a crash without it.
	SyncWrites bool
	// OnSync, if set, is called with SyncWrites after each badger commit that an fsync
	// made durable, with the number of writes (Apply calls or ApplyBatch entries) it
	// covered, before any of them returns. A hook for tests and benchmarks; it must be
	// quick and must not call the Store.
	OnSync func(writes int)
	// ValueLogGCInterval is how often the background goroutine runs badger's
	// value-log GC. 0 disables it. Never runs InMemory.
	ValueLogGCInterval time.Duration
	// ValueLogGCDiscardRatio is the discard ratio passed to RunValueLogGC: a
	// value-log file is rewritten when at least this share of it is garbage.
	ValueLogGCDiscardRatio float64
	// ValueThreshold is the size from which a record (value and RecordHeaderLen) is kept in
	// badger's value log, the LSM tree holding a pointer to it; smaller records live in the
	// tree. 0 = DefaultValueThreshold (every record in the tree); ignored InMemory, where
	// badger keeps no value log (openBadger).
	ValueThreshold int64
	// SyncInterval is how often, without SyncWrites, badger's write-ahead and value logs are
	// written to disk (badger.DB.Sync): what a machine crash can lose, and what a value-log
	// file's rotation must write back before the next write (see doc.go). 0 = never; badger
	// syncs then only at a rotation, a memtable flush and Close.
	SyncInterval time.Duration
	// Logger receives badger's warnings and errors and the store's own
	// messages. nil means slog.Default().
	Logger *slog.Logger
	// MinFreeDisk is the free space kept on the data volume (see Reserve); the zero Reserve
	// keeps none and does not watch the volume. Ignored when InMemory is set.
	MinFreeDisk Reserve
	// DiskCheckInterval is how often the volume's free space is looked at (besides before
	// large writes). 0 = 500ms.
	DiskCheckInterval time.Duration
	// Recover opens a damaged store instead of failing with ErrDamaged: what badger can
	// read is kept, the rest moved aside, and Store.Damage says what was found.
	Recover bool
	// StampBytes bounds the memory that remembers recently written keys' newest timestamps,
	// which spares most writes a badger read for last-write-wins (see stamps.go); 0 turns it
	// off (DefaultConfig: DefaultStampBytes).
	StampBytes int64
	// Badger, if set, adjusts the badger options after the Store has set its
	// own: the place for badger's tuning knobs (memtable size, caches,
	// compression) rather than parallel fields here. It must not change
	// Dir, ValueDir, InMemory or the logger.
	Badger func(badger.Options) badger.Options
}

// DefaultValueThreshold is the record size from which a record is kept in the value log
// (Config.ValueThreshold): badger's largest, so every record is in the LSM tree. A lower one
// is a trade (docs/bench.md, session 18). Large values in the log are not rewritten by every
// compaction: with 4 KiB values and a threshold of 1 KiB a PUT cost 3.6× less CPU and stayed
// flat from 200 MB to 1.5 GB per node, where inline values stalled a fill. But badger learns
// that a value in the log is garbage only when a compaction drops the key's older version,
// and the LSM tree of pointers compacts rarely: 1M overwrites of 50k 4 KiB values left 4 GB
// of log for 195 MB of live values, none of it collected.
const DefaultValueThreshold = maxValueThreshold

// DefaultValueLogFileSize is the size of a value-log file: what one GC rewrite copies at
// most, and what a rotation's write-back can hold up (badger's default is 1 GiB).
const DefaultValueLogFileSize = 256 << 20

// DefaultConfig returns the defaults: on disk in ./data, SyncWrites off with the logs
// written to disk every second, value-log GC every minute at discard ratio 0.5.
func DefaultConfig() Config {
	return Config{
		Dir:                    "data",
		ValueLogGCInterval:     time.Minute,
		ValueLogGCDiscardRatio: 0.5,
		StampBytes:             DefaultStampBytes,
		SyncInterval:           time.Second,
	}
}

// Validate reports the first problem with c, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case !c.InMemory && c.Dir == "":
		return fmt.Errorf("%w: dir is empty and in-memory is off", ErrInvalidConfig)
	case c.StampBytes < 0:
		return fmt.Errorf("%w: stamp cache budget %d is negative", ErrInvalidConfig, c.StampBytes)
	case c.ValueThreshold < 0 || c.ValueThreshold > maxValueThreshold:
		return fmt.Errorf("%w: value threshold %d is outside [0, %d]", ErrInvalidConfig, c.ValueThreshold, maxValueThreshold)
	case c.SyncInterval < 0:
		return fmt.Errorf("%w: sync interval %v is negative", ErrInvalidConfig, c.SyncInterval)
	case c.ValueLogGCInterval < 0:
		return fmt.Errorf("%w: value-log GC interval %v is negative", ErrInvalidConfig, c.ValueLogGCInterval)
	case c.ValueLogGCInterval > 0 && !(c.ValueLogGCDiscardRatio > 0 && c.ValueLogGCDiscardRatio < 1):
		return fmt.Errorf("%w: value-log GC discard ratio %v is outside (0, 1)", ErrInvalidConfig, c.ValueLogGCDiscardRatio)
	}
	return nil
}

// badgerOptions maps c onto badger's options: BadgerOptions, then c.Badger.
func (c Config) badgerOptions(logger *slog.Logger) badger.Options {
	opts := BadgerOptions(c.Dir, c.InMemory, c.SyncWrites, logger)
	if c.ValueThreshold > 0 {
		opts = opts.WithValueThreshold(c.ValueThreshold)
	}
	if c.Badger != nil {
		opts = c.Badger(opts)
	}
	return opts
}
