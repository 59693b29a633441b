// Package store is a node's local copy of the data: a badger v4 database
// holding one Record per key, resolved last-write-wins.
//
// # Layout
//
// A badger key is the 8-byte big-endian ring token of the user key followed
// by the key itself (StoreKey), so keys sort by token, then by key, and every
// vnode's data — a token range (start, end] — is one contiguous key range
// that Scan, CountRange and DeleteRange walk without touching the rest. A
// badger value is a Record in the codec of Record.MarshalBinary: in the LSM
// tree, or from Config.ValueThreshold up (off by default) in badger's value
// log with a pointer in the tree, so that compactions do not rewrite it.
//
// # Ranges
//
// Every range is (start, end]: tokens t with start < t <= end. start >= end
// wraps past the top of the token space; start == end is the whole ring.
//
// # Durability
//
// SyncWrites is off by default. Either way Apply returns only after badger
// has written the record to its write-ahead log (the memtable WAL, or the
// value log for large values) through the OS, so everything acknowledged
// survives a crash of the process: the OS page cache still holds it and
// writes it out. A power loss or kernel crash loses what was written since
// the last sync: the store syncs badger's logs every SyncInterval (one second
// by default), and badger syncs on memtable flush, value-log rotation and
// Close. With SyncWrites no Apply returns before an fsync covers its write,
// and an acknowledged write survives power loss too, at the cost of write
// latency. Concurrent Applies share one commit and one fsync (group commit,
// see Apply): under load a sync covers the writes that queued while the
// previous one ran.
// (Replication across nodes is the first line of defence; SyncWrites is for
// deployments that must survive losing every replica's power at once.)
//
// InMemory keeps everything in memory: nothing survives Close.
//
// # Background work
//
// Open starts up to four goroutines: badger's value-log GC every
// ValueLogGCInterval, the sync of badger's logs every SyncInterval, the watch
// of the data volume's free space (disk.go) and the writer of the high-water
// marks sidecar (damage.go); Close stops them and waits for them before
// closing badger.
//
// # Faults
//
// Below Config.MinFreeDisk of free space, writes fail with ErrDiskFull before
// badger sees them (disk.go). Damaged files make Open fail with ErrDamaged, or
// with Config.Recover open what is left (damage.go).
package store
