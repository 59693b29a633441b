package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

// RangeSource pulls a token range from another node's copy; node/server implements it over
// Replica.StreamRange. Safe for concurrent use.
type RangeSource interface {
	// StreamRange calls fn, from one goroutine and in store-key order, with batches of the
	// records source holds with token t in start < t <= end (wrapping when start >= end),
	// beginning after the store key resumeAfter (nil: from the start), throttled to rateBytes
	// per second (0: none) for all of this source's concurrent pulls together. fn must not
	// keep the batch after it returns. An error from fn stops the stream and is returned.
	StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, rateBytes uint64,
		fn func(batch []store.Entry) error) error
}

// RangeSink is the local store as the mover writes it; *store.Store implements it. Safe for
// concurrent use.
type RangeSink interface {
	// ApplyBatchHeld stores each record unless a version at least as new is held
	// (last-write-wins per key), so a range pulled twice is harmless, and returns the bytes
	// of those it did not store for that reason.
	ApplyBatchHeld(batch []store.Entry) (held uint64, err error)
	// DeleteRange deletes every key with token t in start < t <= end.
	DeleteRange(start, end uint64) error
	// SaveMovePoint makes every record applied so far durable, then records p: where the
	// move pulls on from after a restart.
	SaveMovePoint(p store.MovePoint) error
	// MovePoint returns the point saved for move index of change, if any.
	MovePoint(change uint64, index int) (store.MovePoint, bool)
	// DropMovePoints forgets the points of every change but keep (0: all) or, when index >=
	// 0, that of move index of keep alone.
	DropMovePoints(keep uint64, index int) error
}

var _ RangeSink = (*store.Store)(nil)

// Move states in MoveProgress.
const (
	MovePending   = kvpb.MoveState_MOVE_STATE_PENDING
	MoveStreaming = kvpb.MoveState_MOVE_STATE_STREAMING
	MoveDone      = kvpb.MoveState_MOVE_STATE_DONE
	MoveFailed    = kvpb.MoveState_MOVE_STATE_FAILED
)

// MoveProgress is this node's progress on one move it receives.
type MoveProgress struct {
	ChangeID uint64
	Index    int
	Move     MoveState
	State    kvpb.MoveState
	Keys     uint64
	Bytes    uint64
	// Source is the node being pulled from (Move.Source unless it failed over to another replica).
	Source  string
	Started time.Time
	// StartBytes is what Bytes counted when this attempt started: the attempt's rate is
	// (Bytes - StartBytes) over the time since Started.
	StartBytes uint64
	Finished   time.Time
	Err        string
	Attempts   int
	resumeKey  []byte
	// Position is the furthest token of the range a pull has reached (Move.Start before the
	// first record): with Keys and Bytes, what the rest of the range holds can be judged.
	Position uint64
	// resumeKeys and resumeBytes are what Keys and Bytes counted up to resumeKey: where a
	// retry's count starts again, so that a range pulled twice is counted once.
	resumeKeys, resumeBytes uint64
	// stops counts the attempts that were stopped (a pause, a lower parallel) rather than
	// failed.
	stops int
	// ResumedFrom is the bytes (key + value) that the resume point saved by an earlier run
	// of this node covered when this run took the move up: what it did not pull again.
	ResumedFrom uint64
	// Repulled is the bytes the pulls brought of records the store already held at that
	// version or newer: the move's data pulled twice (by a retry, or after a restart past the
	// saved point) — an upper bound, as a client's write that reached this node before the
	// stream did counts too.
	Repulled uint64
	// Stall is set while the move is stalled (see stall.go); Progress fills it in.
	Stall *kvpb.MoveStall
	// saved is what Bytes was, and when, at the last resume point saved.
	savedBytes uint64
	savedAt    time.Time
	// progressed is when the move last applied records, or its pull began in this run;
	// lastErr the error of its last pull that failed since then.
	progressed time.Time
	lastErr    error
}

// MoverConfig tunes a Mover.
type MoverConfig struct {
	// Parallel is how many moves this node pulls at once.
	Parallel int
	// RetryInterval is the pause before a failed move is pulled again.
	RetryInterval time.Duration
	// CheckpointBytes and CheckpointInterval bound the work a move loses when this node
	// restarts mid-move: its resume point is saved (RangeSink.SaveMovePoint) once either
	// much was pulled since the last one.
	CheckpointBytes    uint64
	CheckpointInterval time.Duration
	// StallAfter is how long a move goes without progress before it is reported stalled,
	// with its cause (see stall.go); 0 = never.
	StallAfter time.Duration
	Logger     *slog.Logger
}

// DefaultMoverConfig returns the defaults: 4 pulls at once. A pull's first chunk comes a
// round trip, a fence, a scan and an apply (15–25 ms) after it starts; with 2 at once those
// starts left a change's stream idle or single for half its time (docs/bench.md, "Ring
// changes"), with 4 they overlap the other pulls' transfers.
//
// A resume point every 64 MiB or 10 s: a restart pulls at most that again per move (plus the
// chunk in flight), for one fsync of the store per checkpoint.
func DefaultMoverConfig() MoverConfig {
	return MoverConfig{Parallel: 4, RetryInterval: time.Second, CheckpointBytes: 64 << 20, CheckpointInterval: 10 * time.Second,
		StallAfter: time.Minute}
}

// Validate checks the config.
func (c MoverConfig) Validate() error {
	if c.Parallel < 1 || c.RetryInterval <= 0 {
		return fmt.Errorf("mover: parallel %d, retry interval %v: %w", c.Parallel, c.RetryInterval, ErrInvalidArgument)
	}
	if c.StallAfter < 0 {
		return fmt.Errorf("mover: stall after %v: must not be negative: %w", c.StallAfter, ErrInvalidArgument)
	}
	if c.CheckpointBytes == 0 || c.CheckpointInterval <= 0 {
		return fmt.Errorf("mover: checkpoint every %d bytes or %v: both must be positive: %w", c.CheckpointBytes, c.CheckpointInterval, ErrInvalidArgument)
	}
	return nil
}

// Mover carries out this node's part of ring changes: it pulls the moves whose target is this
// node from their sources into the local store and reports them done in raft; once no change is
// in flight it deletes the ranges this node no longer replicates. Every move saves its resume
// point in the store now and then (MoverConfig.CheckpointBytes, CheckpointInterval), so a
// restarted node pulls its unfinished moves on from their points; a pull that starts again
// where records are already held is harmless (ApplyBatchHeld is last-write-wins).
type Mover struct {
	c      *Cluster
	src    RangeSource
	sink   RangeSink
	cfg    MoverConfig
	logger *slog.Logger

	mu       sync.Mutex
	progress map[moveKey]*MoveProgress
}

type moveKey struct {
	change uint64
	index  int
}

// NewMover returns a mover for this node; run it with Run.
func NewMover(c *Cluster, src RangeSource, sink RangeSink, cfg MoverConfig) (*Mover, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = c.logger
	}
	return &Mover{c: c, src: src, sink: sink, cfg: cfg, logger: logger.With("component", "mover"), progress: map[moveKey]*MoveProgress{}}, nil
}

// Progress returns this node's progress on the moves of the change in flight (or the last one)
// that target it, in move order.
func (m *Mover) Progress() []MoveProgress {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []MoveProgress
	now := time.Now()
	for _, p := range m.progress {
		cp := *p
		cp.resumeKey, cp.lastErr = nil, nil
		cp.Stall = m.stallOf(p, now)
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b MoveProgress) int {
		if c := cmp.Compare(a.ChangeID, b.ChangeID); c != 0 {
			return c
		}
		return cmp.Compare(a.Index, b.Index)
	})
	return out
}

// Run pulls moves and cleans up until ctx ends; it waits for its pulls to stop before returning.
func (m *Mover) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type running struct {
		cancel context.CancelFunc
		// streaming is true until the pull's data is in; reporting it done in raft does not
		// take one of the Parallel slots.
		streaming bool
		// stopped: cancelled for a pause or a lower parallel; it ends shortly and is pulled
		// again later from where it stopped.
		stopped bool
	}
	active := map[moveKey]*running{}
	streamingCount := func() int {
		n := 0
		for _, r := range active {
			if r.streaming && !r.stopped {
				n++
			}
		}
		return n
	}
	doneCh := make(chan moveKey)
	streamedCh := make(chan moveKey)
	send := func(c chan<- moveKey, k moveKey) {
		select {
		case c <- k:
		case <-ctx.Done():
		}
	}
	retry := time.NewTicker(m.cfg.RetryInterval)
	defer retry.Stop()
	var cleaned string // the state last cleaned up after
	// A write sent by a node still routing by the previous ring can land just after the
	// cleanup; one more pass a little later removes it.
	var cleanedAt time.Time
	recleaned := true

	for {
		watch := m.c.Watch()
		p := m.c.fsm.load()
		ch := p.change
		// Stop pulls that belong to a change no longer in flight.
		for k, r := range active {
			if ch == nil || ch.ID != k.change {
				r.cancel()
			}
		}
		// A pause stops every pull that streams (the chunk being applied completes); a lower
		// parallel stops those beyond it. Both resume from the last key applied.
		parallel := m.cfg.Parallel
		if ch != nil && ch.Parallel > 0 {
			parallel = ch.Parallel
		}
		if ch != nil && ch.Paused() != nil {
			parallel = 0
		}
		for _, r := range active {
			if n := streamingCount(); n > parallel && r.streaming && !r.stopped {
				r.stopped = true
				r.cancel()
			}
		}
		if ch != nil && p.view != nil {
			self := m.c.cfg.ID
			for i, mv := range ch.Moves {
				k := moveKey{ch.ID, i}
				if mv.Target != self || mv.Done || streamingCount() >= parallel {
					continue
				}
				if _, ok := active[k]; ok {
					continue
				}
				if pr := m.get(k); pr != nil {
					// Reported done: raft has it, this node's FSM applies it shortly. Pulling it
					// again meanwhile would only repeat the move.
					if pr.State == MoveDone {
						continue
					}
					if pr.State == MoveFailed && time.Since(pr.Finished) < m.cfg.RetryInterval {
						continue
					}
				}
				pctx, pcancel := context.WithCancel(ctx)
				active[k] = &running{cancel: pcancel, streaming: true}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer pcancel()
					m.pull(pctx, p.view.Current, ch, i, func() { send(streamedCh, k) })
					send(doneCh, k)
				}()
			}
		}
		if ch == nil && len(active) == 0 {
			if err := m.sink.DropMovePoints(0, -1); err != nil {
				m.logger.Warn("forget resume points", "err", err)
			}
		}
		if ch == nil && p.journaled && p.view != nil {
			key := fmt.Sprintf("%d/%d", p.view.Current.Epoch(), lastID(p.last))
			again := key == cleaned && !recleaned && time.Since(cleanedAt) >= 2*m.cfg.RetryInterval
			if (key != cleaned || again) && len(active) == 0 {
				if err := m.cleanup(ctx, p.view.Current); err != nil {
					m.logger.Warn("delete ranges no longer replicated", "err", err)
				} else {
					recleaned = key == cleaned
					cleaned, cleanedAt = key, time.Now()
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case k := <-doneCh:
			delete(active, k)
		case k := <-streamedCh:
			if r := active[k]; r != nil {
				r.streaming = false
			}
		case <-watch:
		case <-retry.C:
		}
	}
}

// recorded reports whether raft has move i of change id done (or the change committed).
func (m *Mover) recorded(id uint64, i int) bool {
	p := m.c.fsm.load()
	if p.change != nil && p.change.ID == id {
		return p.change.Moves[i].Done
	}
	return p.last != nil && p.last.ID == id && p.last.Outcome == OutcomeCommitted
}

func lastID(c *Change) uint64 {
	if c == nil {
		return 0
	}
	return c.ID
}

func (m *Mover) get(k moveKey) *MoveProgress {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.progress[k]
}

func (m *Mover) update(k moveKey, fn func(p *MoveProgress)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.progress[k]
	if p == nil {
		p = &MoveProgress{ChangeID: k.change, Index: k.index, State: MovePending}
		m.progress[k] = p
	}
	fn(p)
}

// fallbackAttempts is the attempt of a move from which, when its source fails, the mover
// pulls from all of the range's other replicas instead of waiting for the source: a source
// that restarts within a few retry intervals is waited for (pulling from all the others
// costs their data twice over). From twice that attempt on, the replicas that answer are
// enough: the others are taken for dead (a dead node being removed, or a second one down).
const fallbackAttempts = 3

// pull streams one move into the local store from its source or, if that keeps failing, from
// all of the range's other current replicas, calls streamed once the data is in (or the pull failed), and
// reports the move done.
func (m *Mover) pull(ctx context.Context, cur *ring.Ring, ch *Change, i int, streamed func()) {
	k := moveKey{ch.ID, i}
	mv := ch.Moves[i]
	// Forget the progress of older changes.
	m.mu.Lock()
	for old := range m.progress {
		if old.change < ch.ID {
			delete(m.progress, old)
		}
	}
	m.mu.Unlock()
	if err := m.sink.DropMovePoints(ch.ID, -1); err != nil {
		m.logger.Warn("forget resume points", "err", err)
	}

	primary, hasPrimary := cur.Member(mv.Source)
	var others []ring.Member
	for _, r := range cur.Lookup(mv.End, cur.ReplicationFactor()) {
		if r.ID != mv.Source && r.ID != m.c.cfg.ID {
			others = append(others, r)
		}
	}
	var resume []byte
	attempts := 0
	// failed is how many earlier attempts failed (those stopped by a pause or the like are
	// not failures): what the fallback to other replicas counts.
	failed := 0
	// When the first and the last chunk of this pull arrived: the streaming window that the
	// "range received" line reports (the change's wall time also holds planning and hand-over).
	var firstChunk, lastChunk time.Time
	var pulledKeys, pulledBytes uint64
	m.update(k, func(p *MoveProgress) {
		p.Move, p.State, p.Started, p.Err = mv, MoveStreaming, time.Now(), ""
		if p.Attempts == 0 {
			p.Position = mv.Start
		}
		p.Attempts++
		if p.Attempts == 1 && p.resumeKey == nil {
			// The first pull of this run: on from the point an earlier run saved.
			if pt, ok := m.sink.MovePoint(ch.ID, i); ok && pt.Start == mv.Start && pt.End == mv.End && len(pt.After) > 0 {
				p.resumeKey, p.resumeKeys, p.resumeBytes = pt.After, pt.Keys, pt.Bytes
				p.ResumedFrom, p.savedBytes = pt.Bytes, pt.Bytes
				if t, _ := store.SplitStoreKey(pt.After); (ring.Move{Start: mv.Start, End: mv.End}).Covered(t) > 0 {
					p.Position = t
				}
			}
		}
		resume, attempts = p.resumeKey, p.Attempts
		failed = p.Attempts - 1 - p.stops
		// What an earlier attempt pulled past the point this one resumes from comes again.
		p.Keys, p.Bytes = p.resumeKeys, p.resumeBytes
		p.StartBytes = p.Bytes
		if p.savedAt.IsZero() {
			p.savedAt = time.Now()
		}
		if p.progressed.IsZero() {
			p.progressed = time.Now()
		}
	})
	if pr := m.get(k); resume != nil && attempts == 1 {
		m.logger.Info("move resumes from its saved point", "change", ch.ID, "move", i, "range", ring.FormatRange(mv.Start, mv.End),
			"keys", pr.Keys, "bytes", pr.Bytes)
	}
	rate := ch.RateFor(m.c.cfg.ID)
	if cur := m.c.Change(); cur != nil && cur.ID == ch.ID {
		rate = cur.RateFor(m.c.cfg.ID)
	}
	// stream pulls the range from src after from; advance records the position reached as
	// where a retry resumes (only the move's own source's position means anything there).
	// Several replicas pulled one after the other send the same keys: the move's count is the
	// largest of theirs.
	stream := func(src ring.Member, from []byte, advance bool) error {
		// base: what was counted up to from (the resume point); keys, bytes: this stream's.
		var base struct{ keys, bytes uint64 }
		m.update(k, func(p *MoveProgress) { p.Source, base.keys, base.bytes = src.ID, p.resumeKeys, p.resumeBytes })
		var keys, bytes uint64
		return m.src.StreamRange(ctx, src, mv.Start, mv.End, from, rate, func(batch []store.Entry) error {
			held, err := m.sink.ApplyBatchHeld(batch)
			if err != nil {
				return fmt.Errorf("apply: %w", err)
			}
			var n uint64
			for _, e := range batch {
				n += uint64(len(e.Key) + len(e.Record.Value))
			}
			lastChunk = time.Now()
			if firstChunk.IsZero() {
				firstChunk = lastChunk
			}
			pulledKeys += uint64(len(batch))
			pulledBytes += n
			last := batch[len(batch)-1]
			sk := store.StoreKey(last.Token, last.Key)
			keys += uint64(len(batch))
			bytes += n
			var save *store.MovePoint
			m.update(k, func(p *MoveProgress) {
				p.Keys = max(p.Keys, base.keys+keys)
				p.Bytes = max(p.Bytes, base.bytes+bytes)
				p.Repulled += held
				p.progressed, p.lastErr = time.Now(), nil
				if rm := (ring.Move{Start: mv.Start, End: mv.End}); rm.Covered(last.Token) > rm.Covered(p.Position) {
					p.Position = last.Token
				}
				if advance {
					p.resumeKey, p.resumeKeys, p.resumeBytes = sk, p.Keys, p.Bytes
					if p.Bytes-min(p.savedBytes, p.Bytes) >= m.cfg.CheckpointBytes || time.Since(p.savedAt) >= m.cfg.CheckpointInterval {
						save = &store.MovePoint{Change: ch.ID, Index: i, Start: mv.Start, End: mv.End, Source: src.ID, After: sk, Keys: p.Keys, Bytes: p.Bytes}
						p.savedBytes, p.savedAt = p.Bytes, time.Now()
					}
				}
			})
			if advance {
				resume = sk
			}
			if save != nil {
				// Only after ApplyBatchHeld returned: the point names applied records alone,
				// and SaveMovePoint syncs them before it records it.
				if err := m.sink.SaveMovePoint(*save); err != nil {
					m.logger.Warn("save resume point", "change", ch.ID, "move", i, "err", err)
				}
			}
			return nil
		})
	}
	err := fmt.Errorf("move %d: no source in the current ring: %w", i, ErrUnknownMember)
	if hasPrimary {
		err = stream(primary, resume, true)
		if err != nil && ctx.Err() == nil {
			m.logger.Warn("pull range", "change", ch.ID, "move", i, "source", primary.ID, "err", err)
		}
	}
	if err != nil && ctx.Err() == nil && len(others) > 0 && (!hasPrimary || failed+1 >= fallbackAttempts) {
		// The source (the replica this node displaces) stays unreachable. One other replica
		// may lack a write the source holds (acknowledged by a quorum without it); the
		// union of all the others holds every such write. Pull each of them, from where the
		// source stopped; if one fails, the move fails and is retried from the source —
		// until the source has failed 2×fallbackAttempts times: then the replicas that
		// answer are enough (a dead node is being removed, or another is down too), and
		// the move fails only when none answers.
		settle := failed+1 >= 2*fallbackAttempts
		var failed []error
		for _, r := range others {
			if e := stream(r, resume, false); e != nil {
				if ctx.Err() == nil {
					m.logger.Warn("pull range", "change", ch.ID, "move", i, "source", r.ID, "err", e)
				}
				failed = append(failed, e)
				if !settle {
					break
				}
			}
		}
		switch {
		case len(failed) == 0:
			err = nil
		case settle && len(failed) < len(others):
			err = nil
			m.logger.Warn("range pulled from the replicas that answer", "change", ch.ID, "move", i,
				"range", ring.FormatRange(mv.Start, mv.End), "answered", len(others)-len(failed), "replicas", len(others)+1)
		default:
			err = failed[len(failed)-1]
		}
	}
	streamed()
	if err == nil {
		err = m.c.MoveDone(ctx, ch.ID, i)
		if err != nil && m.recorded(ch.ID, i) {
			err = nil // recorded; the answer was lost
		}
		if err == nil {
			if derr := m.sink.DropMovePoints(ch.ID, i); derr != nil {
				m.logger.Warn("forget resume point", "change", ch.ID, "move", i, "err", derr)
			}
		}
	}
	m.update(k, func(p *MoveProgress) {
		p.Finished = time.Now()
		switch {
		case err == nil:
			p.State = MoveDone
		case ctx.Err() != nil:
			// Stopped (a pause, a lower parallel, an abort, a shutdown): not an attempt
			// that failed, so it brings no fallback to other replicas closer.
			p.State = MovePending
			p.stops++
		default:
			p.State, p.Err, p.lastErr = MoveFailed, err.Error(), err
		}
	})
	if err == nil {
		attrs := []any{"change", ch.ID, "move", i, "source", mv.Source, "range", ring.FormatRange(mv.Start, mv.End), "keys", pulledKeys, "bytes", pulledBytes}
		if !firstChunk.IsZero() {
			attrs = append(attrs, "first_chunk", firstChunk.UTC().Format(time.RFC3339Nano), "last_chunk", lastChunk.UTC().Format(time.RFC3339Nano))
		}
		m.logger.Info("range received", attrs...)
	} else if !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		m.logger.Warn("move failed; will retry", "change", ch.ID, "move", i, "err", err)
	}
}

// cleanup deletes every range of r that this node does not replicate, merging neighbours.
func (m *Mover) cleanup(ctx context.Context, r *ring.Ring) error {
	self := m.c.cfg.ID
	n := r.ReplicationFactor()
	var spans [][2]uint64
	for _, rg := range r.Ranges() {
		if slices.ContainsFunc(r.Lookup(rg.End, n), func(mb ring.Member) bool { return mb.ID == self }) {
			continue
		}
		if l := len(spans); l > 0 && spans[l-1][1] == rg.Start {
			spans[l-1][1] = rg.End
			continue
		}
		spans = append(spans, [2]uint64{rg.Start, rg.End})
	}
	for _, s := range spans {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := m.sink.DeleteRange(s[0], s[1]); err != nil {
			return fmt.Errorf("delete range (%d, %d]: %w", s[0], s[1], err)
		}
	}
	if len(spans) > 0 {
		m.logger.Info("deleted ranges no longer replicated", "ranges", len(spans), "epoch", r.Epoch())
	}
	return nil
}
