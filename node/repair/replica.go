package repair

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"ringkv/node/cluster"
	"ringkv/node/hlc"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/node/stream"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// Store is the part of the store a replica's repair reads and writes (store.Store). Safe
// for concurrent use.
type Store interface {
	Visitor
	ApplyBatch(batch []store.Entry) (applied int, err error)
	PurgeTombstones(ctx context.Context, start, end, before uint64) (int, error)
}

// ReplicaConfig is what a replica's side of repair needs.
type ReplicaConfig struct {
	Store Store
	// Source pulls ranges from another replica (a stream.RangeClient of its own, whose
	// byte budget all of this node's repair pulls share).
	Source cluster.RangeSource
	State  *State
	// Grace is how old a tombstone must be before it may be purged (--tombstone-grace);
	// 0 never purges.
	Grace time.Duration
	// Now is the wall clock (nil = time.Now); tests move it past the grace.
	Now    func() time.Time
	Logger *slog.Logger
	// Latency, when set, returns this node's recent tail latency (a p99 over the last second
	// or so). Tree walks then back off by it, all of them together, as the ranges a source
	// serves do (stream.Adaptive): the pace grows step by step while the latency holds at or
	// under LatencyTarget and halves above it, never above the session's rate. A walk is
	// CPU and disk on the node whose clients feel it; a fixed rate cannot tell a quiet
	// machine from a busy one.
	Latency func() time.Duration
	// LatencyTarget is the latency the walks' pace holds; 0 = twice the latency seen when
	// the walks began (after stream.AdaptIdle without walks).
	LatencyTarget time.Duration
}

// Replica is this node's side of repair: it hashes its ranges into trees, pulls the
// ranges a coordinator tells it to from another replica, and records (and purges after)
// completed repairs. Safe for concurrent use.
type Replica struct {
	cfg ReplicaConfig
	lim stream.Limiter  // the pace of tree walks, all of them together
	ad  stream.Adaptive // that pace by Latency, when set

	// oldest is, per range, the oldest tombstone the last tree walk saw (0: none), so that
	// MarkRepaired walks a range again to purge only when something may be purged.
	mu     sync.Mutex
	oldest map[Span]uint64
	// kept are the trees built for a descent (Summary), by id, until Under asks for their
	// leaves or keepTrees passes.
	kept   map[uint64]keptTree
	nextID uint64

	walks atomic.Uint64 // tree walks completed
}

// Walks is how many tree walks of ranges this replica has completed since it started.
func (r *Replica) Walks() uint64 { return r.walks.Load() }

type keptTree struct {
	t     *Tree
	built time.Time
}

// keepTrees is how long a tree built for a descent is kept; maxKept bounds how many.
const (
	keepTrees = 2 * time.Minute
	maxKept   = 64
)

// NewReplica returns a replica's side of repair.
func NewReplica(cfg ReplicaConfig) *Replica {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Replica{cfg: cfg, oldest: map[Span]uint64{}, kept: map[uint64]keptTree{}}
}

// Tree builds the Merkle tree of (start, end] at depth, walking at most rateBytes per
// second (0 = no ceiling), slower while this node's latency is above its target (Latency).
func (r *Replica) Tree(ctx context.Context, start, end uint64, depth int, rateBytes uint64) (*Tree, error) {
	var rate func() uint64
	switch {
	case r.cfg.Latency != nil:
		rate = func() uint64 {
			return r.ad.Rate(rateBytes, stream.Signals{Latency: r.cfg.Latency()}, r.cfg.LatencyTarget, time.Now())
		}
	case rateBytes > 0:
		rate = func() uint64 { return rateBytes }
	}
	var pace func(ctx context.Context, n int) error
	if rate != nil {
		pace = func(ctx context.Context, n int) error { return r.lim.Wait(ctx, n, rate, nil) }
	}
	t, err := Build(ctx, r.cfg.Store, start, end, depth, pace)
	if err != nil {
		return nil, err
	}
	r.walks.Add(1)
	r.mu.Lock()
	if len(r.oldest) > 1<<16 { // ranges of rings long gone
		clear(r.oldest)
	}
	r.oldest[Span{start, end}] = t.OldestTombstone
	r.mu.Unlock()
	return t, nil
}

// Summary builds the tree of (start, end] as Tree does and keeps it for Under: it returns
// the tree's id (the tree's Leaves are for the caller to read, not to send: a descent sends
// Level's nodes first).
func (r *Replica) Summary(ctx context.Context, start, end uint64, depth int, rateBytes uint64) (uint64, *Tree, error) {
	t, err := r.Tree(ctx, start, end, depth, rateBytes)
	if err != nil {
		return 0, nil, err
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	var oldestID uint64
	for id, k := range r.kept {
		if now.Sub(k.built) > keepTrees {
			delete(r.kept, id)
		} else if oldestID == 0 || id < oldestID {
			oldestID = id
		}
	}
	if len(r.kept) >= maxKept {
		delete(r.kept, oldestID)
	}
	r.nextID++
	r.kept[r.nextID] = keptTree{t: t, built: now}
	return r.nextID, t, nil
}

// Under returns the leaves under nodes (sorted) of level of the tree Summary kept as id, and
// lets the tree go (ErrTreeGone when it is no longer kept).
func (r *Replica) Under(id uint64, level int, nodes []uint32) (*Tree, []Leaf, error) {
	r.mu.Lock()
	k, ok := r.kept[id]
	delete(r.kept, id)
	r.mu.Unlock()
	if !ok {
		return nil, nil, fmt.Errorf("tree %d: %w", id, ErrTreeGone)
	}
	return k.t, k.t.Under(level, nodes), nil
}

// sawTombstone notes a tombstone pulled into a range after its tree walk, so that the purge
// after the repair does not skip it.
func (r *Replica) sawTombstone(token, ts uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for sp, old := range r.oldest {
		if (ring.Range{Start: sp.Start, End: sp.End}).Contains(token) && (old == 0 || ts < old) {
			r.oldest[sp] = ts
		}
	}
}

// PullResult counts what a Pull received and applied.
type PullResult struct {
	Received, Applied, Bytes uint64
}

// Pull streams spans from source (checksummed, paced at rateBytes for all of this node's
// pulls) and applies them; a record is written only if newer than the one held.
//
// A source that cannot be reached is tried again for up to pullReconnect: the plan found
// every replica answering, so a refused connection is most likely one still in its reconnect
// backoff after the source restarted. Records applied twice are harmless (newer wins).
func (r *Replica) Pull(ctx context.Context, source ring.Member, spans []Span, rateBytes uint64) (PullResult, error) {
	var res PullResult
	var unreachableSince time.Time
	for i := 0; i < len(spans); i++ {
		sp := spans[i]
		err := r.cfg.Source.StreamRange(ctx, source, sp.Start, sp.End, nil, rateBytes, func(batch []store.Entry) error {
			n, err := r.cfg.Store.ApplyBatch(batch)
			for _, e := range batch {
				if e.Record.Tombstone {
					r.sawTombstone(e.Token, e.Record.TS)
				}
			}
			res.Applied += uint64(n)
			res.Received += uint64(len(batch))
			for _, e := range batch {
				res.Bytes += uint64(len(e.Key) + len(e.Record.Value))
			}
			return err
		})
		if rpcerr.ReasonOf(err) == kvpb.Reason_REASON_REPLICA_UNAVAILABLE && ctx.Err() == nil {
			now := time.Now()
			if unreachableSince.IsZero() {
				unreachableSince = now
			}
			if now.Sub(unreachableSince) < pullReconnect {
				select {
				case <-time.After(pullRetryWait):
				case <-ctx.Done():
				}
				i-- // the same span again
				continue
			}
		}
		if err != nil {
			return res, fmt.Errorf("pull %s from %s: %w", fmtRange(sp.Start, sp.End), source.ID, err)
		}
		unreachableSince = time.Time{}
	}
	return res, nil
}

// pullReconnect bounds how long Pull keeps trying a source it cannot reach: longer than
// gRPC's reconnect backoff between two nodes (at most 2 s here), short enough that a source
// really down fails the range soon. pullRetryWait is the wait between two tries.
const (
	pullReconnect = 3 * time.Second
	pullRetryWait = 200 * time.Millisecond
)

// MarkRepaired records that a repair which began comparing at started covered ranges on
// every replica, then purges from them the tombstones that are safe to drop: stamped before
// started (so every replica held them when the trees were built, and holds them now) and
// older than the grace. A replica that missed such a delete could only have been down for
// the repair, which then did not complete; so no older value of a purged key is left to
// come back.
func (r *Replica) MarkRepaired(ctx context.Context, ranges []Span, started, finished time.Time) (purged int, err error) {
	marks := make([]Mark, len(ranges))
	for i, rg := range ranges {
		marks[i] = Mark{Start: rg.Start, End: rg.End, StartedUnixNanos: started.UnixNano(), FinishedUnixNanos: finished.UnixNano()}
	}
	if err := r.cfg.State.Record(marks); err != nil {
		return 0, err
	}
	if r.cfg.Grace <= 0 {
		return 0, nil
	}
	for _, rg := range ranges {
		n, err := r.Purge(ctx, rg)
		purged += n
		if err != nil {
			return purged, err
		}
	}
	return purged, nil
}

// Purge drops the tombstones of one range that a completed repair has covered and the
// grace has passed: stamped before both the start of the range's last completed repair and
// now minus the grace. A range no repair has covered is left alone.
func (r *Replica) Purge(ctx context.Context, rg Span) (int, error) {
	m, ok := r.cfg.State.Mark(rg.Start, rg.End)
	if !ok || r.cfg.Grace <= 0 {
		return 0, nil
	}
	before := min(hlc.Since(time.Unix(0, m.StartedUnixNanos)), hlc.Since(r.cfg.Now().Add(-r.cfg.Grace)))
	r.mu.Lock()
	oldest, walked := r.oldest[rg]
	r.mu.Unlock()
	if walked && (oldest == 0 || oldest >= before) {
		// The repair's own walk of the range saw no tombstone old enough. One applied since
		// then was stamped after the repair began (or arrived late, and then it waits for the
		// next repair): nothing to purge.
		return 0, nil
	}
	n, err := r.cfg.Store.PurgeTombstones(ctx, rg.Start, rg.End, before)
	if err != nil {
		return n, fmt.Errorf("purge tombstones %s: %w", fmtRange(rg.Start, rg.End), err)
	}
	if n > 0 {
		r.cfg.Logger.Info("tombstones purged", "range", fmtRange(rg.Start, rg.End), "tombstones", n)
	}
	return n, nil
}

// LastRepaired is when a repair last completed on every one of ranges (zero: never).
func (r *Replica) LastRepaired(ranges []Span) time.Time { return r.cfg.State.LastRepaired(ranges) }
