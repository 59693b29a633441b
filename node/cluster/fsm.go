package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"ringkv/node/ring"
	"ringkv/node/store"
)

// RingState is the serialisable form of a ring: what raft journals.
type RingState struct {
	Epoch    uint64        `json:"epoch"`
	Replicas int           `json:"replicas"`
	Members  []ring.Member `json:"members"`
}

func ringStateOf(r *ring.Ring) RingState {
	return RingState{Epoch: r.Epoch(), Replicas: r.ReplicationFactor(), Members: r.Members()}
}

func (s RingState) build() (*ring.Ring, error) {
	return ring.New(s.Epoch, s.Replicas, s.Members)
}

// MoveState is one move of a change and whether its receiver has it.
type MoveState struct {
	Start  uint64 `json:"start"`
	End    uint64 `json:"end"`
	Source string `json:"source"`
	Target string `json:"target"`
	Done   bool   `json:"done,omitempty"`
}

// Change kinds.
const (
	KindAdd       = "add"
	KindRemove    = "remove"
	KindRebalance = "rebalance"
)

// Change outcomes, set once a change leaves flight.
const (
	OutcomeCommitted = "committed"
	OutcomeAborted   = "aborted"
)

// Change is a ring change as raft journals it: the ring it leads to and the moves that must
// be done before the ring flips. Values handed out are copies; do not share across goroutines
// while mutating.
type Change struct {
	ID        uint64      `json:"id"`
	Kind      string      `json:"kind"`
	NodeID    string      `json:"node_id"`
	Addr      string      `json:"addr,omitempty"`
	Force     bool        `json:"force,omitempty"`
	RateBytes uint64      `json:"rate_bytes,omitempty"`
	FromEpoch uint64      `json:"from_epoch"`
	Next      RingState   `json:"next"`
	Moves     []MoveState `json:"moves"`
	// Tokens are the vnodes a rebalance hands over.
	Tokens []ring.TokenMove `json:"tokens,omitempty"`
	// Unix seconds, stamped by the leader that proposed the command.
	StartedUnix  int64  `json:"started_unix"`
	FinishedUnix int64  `json:"finished_unix,omitempty"`
	Outcome      string `json:"outcome,omitempty"`
	// Pauses are the operator's pauses, oldest first; the last is open while paused.
	Pauses []Pause `json:"pauses,omitempty"`
	// NodeRates override RateBytes for single receivers (0: unthrottled).
	NodeRates map[string]uint64 `json:"node_rates,omitempty"`
	// Parallel is the pulls at once per receiver; 0 = each node's default.
	Parallel int `json:"parallel,omitempty"`
	// By is who started the change; StartedUnixMs when, in milliseconds.
	By            string `json:"by,omitempty"`
	StartedUnixMs int64  `json:"started_unix_ms,omitempty"`
	// Prediction is the plan's load per node before and after (history.go); nil: none.
	Prediction *Prediction `json:"prediction,omitempty"`
}

// Pause is one pause of a change: who paused it, when and why, and who resumed it when.
type Pause struct {
	By          string `json:"by"`
	Reason      string `json:"reason,omitempty"`
	Unix        int64  `json:"unix"`
	ResumedBy   string `json:"resumed_by,omitempty"`
	ResumedUnix int64  `json:"resumed_unix,omitempty"`
	// Index and ResumedIndex are the raft indexes of the entries that paused and resumed: a
	// call that onLeader retried tells its own earlier try by them (Cluster.Pause, Resume).
	Index        uint64 `json:"index,omitempty"`
	ResumedIndex uint64 `json:"resumed_index,omitempty"`
}

// Paused returns the open pause of the change, nil when it is not paused.
func (c *Change) Paused() *Pause {
	if c == nil || len(c.Pauses) == 0 || c.Pauses[len(c.Pauses)-1].ResumedUnix != 0 {
		return nil
	}
	return &c.Pauses[len(c.Pauses)-1]
}

// PausedFor is how long the change has been paused in all, up to now for an open pause.
func (c *Change) PausedFor(now time.Time) time.Duration {
	var d time.Duration
	for _, p := range c.Pauses {
		end := p.ResumedUnix
		if end == 0 {
			end = now.Unix()
		}
		if end > p.Unix {
			d += time.Duration(end-p.Unix) * time.Second
		}
	}
	return d
}

// RateFor is the streaming throttle of receiver id: its own, else the change's.
func (c *Change) RateFor(id string) uint64 {
	if r, ok := c.NodeRates[id]; ok {
		return r
	}
	return c.RateBytes
}

// Pending is how many moves are not done.
func (c *Change) Pending() int {
	n := 0
	for _, m := range c.Moves {
		if !m.Done {
			n++
		}
	}
	return n
}

func (c *Change) clone() *Change {
	if c == nil {
		return nil
	}
	cp := *c
	cp.Moves = slices.Clone(c.Moves)
	cp.Tokens = slices.Clone(c.Tokens)
	cp.Next.Members = slices.Clone(c.Next.Members)
	cp.Pauses = slices.Clone(c.Pauses)
	cp.NodeRates = maps.Clone(c.NodeRates)
	cp.Prediction = c.Prediction.clone()
	return &cp
}

// fsmState is the whole replicated state; it is also the snapshot format.
type fsmState struct {
	// Index is the raft index of the last entry applied. The node keeps a local copy of the
	// state; raft replays entries at or below it on restart, and the FSM skips them.
	Index        uint64     `json:"index"`
	Ring         *RingState `json:"ring,omitempty"`
	Change       *Change    `json:"change,omitempty"`
	Last         *Change    `json:"last,omitempty"`
	LastChangeID uint64     `json:"last_change_id"`
	// Repair is the repair journal (repairs.go).
	Repair *RepairJournal `json:"repair,omitempty"`
	// History is the journal of finished changes (history.go).
	History *History `json:"history,omitempty"`
}

// Command ops.
const (
	opBootstrap = "bootstrap"
	opBegin     = "begin"
	opMoveDone  = "move_done"
	opCommit    = "commit"
	opAbort     = "abort"
	opSetRate   = "set_rate"
	opPause     = "pause"
	opResume    = "resume"
	opParallel  = "set_parallel"
	opObserve   = "observe"
)

// command is one raft log entry, JSON-encoded: ring changes are rare and small, and JSON keeps
// the journal readable with raft's own tools.
type command struct {
	Op        string     `json:"op"`
	Ring      *RingState `json:"ring,omitempty"`
	Change    *Change    `json:"change,omitempty"`
	ChangeID  uint64     `json:"change_id,omitempty"`
	Move      int        `json:"move,omitempty"`
	Unix      int64      `json:"unix,omitempty"`
	RateBytes uint64     `json:"rate_bytes,omitempty"`
	// NodeID names the receiver of a set_rate that overrides the change's rate for it alone.
	NodeID string `json:"node_id,omitempty"`
	// By and Reason are who pauses or resumes, and why.
	By       string     `json:"by,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	Parallel int        `json:"parallel,omitempty"`
	Repair   *repairCmd `json:"repair,omitempty"`
	// UnixMs is Unix in milliseconds (begin, commit, abort).
	UnixMs  int64       `json:"unix_ms,omitempty"`
	Observe *observeCmd `json:"observe,omitempty"`
}

// applyResult is what fsm.Apply returns through raft's ApplyFuture.Response.
type applyResult struct {
	changeID uint64
	err      error
}

// published is what readers see, swapped atomically after every apply.
type published struct {
	// journaled is false while the view is only the founders' ring, not yet in raft.
	journaled bool
	// replicas is the cluster's replication factor N, not capped by the ring's size.
	replicas int
	view     *ring.View
	change   *Change
	last     *Change
	repair   *RepairJournal
	history  *History
	// index is the raft index of the last entry applied.
	index uint64
}

// fsm is the raft state machine. Apply, Snapshot and Restore are called by raft (one at a
// time for Apply/Restore); readers use load(), which never blocks.
type fsm struct {
	path   string // "" for in-memory nodes
	logger *slog.Logger

	mu    sync.Mutex
	state fsmState

	pub     atomic.Pointer[published]
	watchMu sync.Mutex
	watch   chan struct{}
}

var _ raft.FSM = (*fsm)(nil)

func newFSM(path string, logger *slog.Logger) *fsm {
	f := &fsm{path: path, logger: logger, watch: make(chan struct{})}
	f.pub.Store(&published{})
	return f
}

// loadLocal reads the copy of the state the node last applied, so that a restarted node
// serves its last ring before raft has a quorum to replay the log against.
func (f *fsm) loadLocal() (bool, error) {
	if f.path == "" {
		return false, nil
	}
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read ring state: %w", err)
	}
	var st fsmState
	if err := json.Unmarshal(b, &st); err != nil {
		return false, fmt.Errorf("decode ring state %s: %w", f.path, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = st
	f.publishLocked(false)
	return st.Ring != nil, nil
}

// provisional publishes a ring that is not (yet) in raft: the founders' ring, computed the same
// on every founder, served until the leader journals it.
func (f *fsm) provisional(r *ring.Ring, replicas int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state.Ring != nil {
		return
	}
	f.pub.Store(&published{view: &ring.View{Current: r}, replicas: replicas})
	f.notify()
}

func (f *fsm) load() *published { return f.pub.Load() }

// watchCh is closed at the next change of what load returns.
func (f *fsm) watchCh() <-chan struct{} {
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	return f.watch
}

func (f *fsm) notify() {
	f.watchMu.Lock()
	close(f.watch)
	f.watch = make(chan struct{})
	f.watchMu.Unlock()
}

func (f *fsm) snapshotState() fsmState {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := json.Marshal(f.state)
	var st fsmState
	_ = json.Unmarshal(b, &st)
	return st
}

func (f *fsm) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.Index <= f.state.Index {
		return applyResult{} // replayed after a restart; the local copy already has it
	}
	f.state.Index = l.Index
	if l.Type != raft.LogCommand {
		return nil
	}
	var cmd command
	if err := json.Unmarshal(l.Data, &cmd); err != nil {
		return applyResult{err: fmt.Errorf("decode command at index %d: %w", l.Index, err)}
	}
	res := f.applyLocked(cmd)
	if res.err == nil {
		f.publishLocked(true)
	}
	return res
}

func (f *fsm) applyLocked(cmd command) applyResult {
	st := &f.state
	switch cmd.Op {
	case opBootstrap:
		if st.Ring != nil {
			return applyResult{} // a second founder's bootstrap: already done
		}
		if cmd.Ring == nil {
			return applyResult{err: fmt.Errorf("bootstrap without a ring: %w", ErrInvalidArgument)}
		}
		if _, err := cmd.Ring.build(); err != nil {
			return applyResult{err: fmt.Errorf("bootstrap ring: %w", err)}
		}
		r := *cmd.Ring
		st.Ring = &r
		return applyResult{}
	case opBegin:
		if st.Ring == nil {
			return applyResult{err: ErrNoRing}
		}
		if st.Change != nil {
			return applyResult{err: fmt.Errorf("change %d: %w", st.Change.ID, ErrChangeInFlight)}
		}
		ch := cmd.Change.clone()
		if ch == nil || ch.FromEpoch != st.Ring.Epoch {
			return applyResult{err: fmt.Errorf("plan is not from the current epoch %d: %w", st.Ring.Epoch, ErrChangeInFlight)}
		}
		if _, err := ch.Next.build(); err != nil {
			return applyResult{err: fmt.Errorf("next ring: %w", err)}
		}
		st.LastChangeID++
		ch.ID = st.LastChangeID
		if ch.Kind == KindRemove {
			setState(st.Ring.Members, ch.NodeID, ring.StateLeaving)
		}
		ch.StartedUnix, ch.StartedUnixMs = cmd.Unix, cmd.UnixMs
		st.Change = ch
		return applyResult{changeID: ch.ID}
	case opMoveDone:
		ch := st.Change
		if ch == nil || ch.ID != cmd.ChangeID {
			return applyResult{err: fmt.Errorf("change %d: %w", cmd.ChangeID, ErrNoChange)}
		}
		if cmd.Move < 0 || cmd.Move >= len(ch.Moves) {
			return applyResult{err: fmt.Errorf("move %d of %d: %w", cmd.Move, len(ch.Moves), ErrInvalidArgument)}
		}
		ch.Moves[cmd.Move].Done = true
		return applyResult{changeID: ch.ID}
	case opSetRate:
		ch := st.Change
		if ch == nil {
			return applyResult{err: ErrNoChange}
		}
		if cmd.NodeID == "" {
			ch.RateBytes = cmd.RateBytes
			return applyResult{changeID: ch.ID}
		}
		if !ch.involves(st.Ring, cmd.NodeID) {
			return applyResult{err: fmt.Errorf("rate of %s: %w", cmd.NodeID, ErrUnknownMember)}
		}
		if ch.NodeRates == nil {
			ch.NodeRates = map[string]uint64{}
		}
		ch.NodeRates[cmd.NodeID] = cmd.RateBytes
		return applyResult{changeID: ch.ID}
	case opParallel:
		if st.Change == nil {
			return applyResult{err: ErrNoChange}
		}
		if cmd.Parallel < 1 {
			return applyResult{err: fmt.Errorf("parallel %d: want at least 1: %w", cmd.Parallel, ErrInvalidArgument)}
		}
		st.Change.Parallel = cmd.Parallel
		return applyResult{changeID: st.Change.ID}
	case opPause:
		ch := st.Change
		switch {
		case ch == nil || ch.Pending() == 0:
			return applyResult{err: ErrNothingToPause}
		case ch.Paused() != nil:
			p := ch.Paused()
			return applyResult{err: fmt.Errorf("change %d paused by %s at %s: %w", ch.ID, p.By, time.Unix(p.Unix, 0).UTC().Format(time.RFC3339), ErrAlreadyPaused)}
		}
		ch.Pauses = append(ch.Pauses, Pause{By: cmd.By, Reason: cmd.Reason, Unix: cmd.Unix, Index: st.Index})
		return applyResult{changeID: ch.ID}
	case opResume:
		ch := st.Change
		p := ch.Paused()
		if p == nil {
			return applyResult{err: ErrNotPaused}
		}
		p.ResumedBy, p.ResumedUnix, p.ResumedIndex = cmd.By, max(cmd.Unix, p.Unix), st.Index
		return applyResult{changeID: ch.ID}
	case opCommit, opAbort:
		ch := st.Change
		if ch == nil || (cmd.ChangeID != 0 && ch.ID != cmd.ChangeID) {
			return applyResult{err: fmt.Errorf("change %d: %w", cmd.ChangeID, ErrNoChange)}
		}
		if cmd.Op == opCommit {
			if n := ch.Pending(); n > 0 {
				return applyResult{err: fmt.Errorf("commit change %d with %d moves pending: %w", ch.ID, n, ErrInvalidArgument)}
			}
			next := ch.Next
			next.Members = slices.Clone(next.Members)
			for i := range next.Members {
				next.Members[i].State = ring.StateUp
			}
			st.Ring = &next
			ch.Outcome = OutcomeCommitted
		} else {
			st.Ring.Members = slices.Clone(st.Ring.Members)
			setState(st.Ring.Members, ch.NodeID, ring.StateUp)
			ch.Outcome = OutcomeAborted
		}
		ch.FinishedUnix = cmd.Unix
		st.Last, st.Change = ch, nil
		ms := cmd.UnixMs
		if ms == 0 {
			ms = cmd.Unix * 1000
		}
		st.recordFinished(ch, ms)
		return applyResult{changeID: ch.ID}
	case opObserve:
		return applyObserveLocked(st, cmd.ChangeID, cmd.Observe)
	default:
		if isRepairOp(cmd.Op) {
			return applyRepairLocked(st, cmd.Op, cmd.Unix, cmd.Repair)
		}
		return applyResult{err: fmt.Errorf("unknown command %q: %w", cmd.Op, ErrInvalidArgument)}
	}
}

// involves reports whether node id is a member of the current ring or of the change's next.
func (c *Change) involves(cur *RingState, id string) bool {
	has := func(ms []ring.Member) bool {
		return slices.ContainsFunc(ms, func(m ring.Member) bool { return m.ID == id })
	}
	return has(c.Next.Members) || (cur != nil && has(cur.Members))
}

// setState sets the state of member id in ms, if it is there.
func setState(ms []ring.Member, id string, s ring.State) {
	for i := range ms {
		if ms[i].ID == id {
			ms[i].State = s
		}
	}
}

// publishLocked rebuilds what readers see and, when persist is set, writes the local copy.
func (f *fsm) publishLocked(persist bool) {
	p := &published{change: f.state.Change.clone(), last: f.state.Last.clone(), repair: f.state.Repair.clone(), history: f.state.History.clone(), index: f.state.Index}
	if f.state.Ring != nil {
		cur, err := f.state.Ring.build()
		if err != nil {
			f.logger.Error("journaled ring does not build; keeping the previous view", "err", err)
			return
		}
		v := &ring.View{Current: cur, Change: f.state.LastChangeID}
		if f.state.Change != nil {
			if next, err := f.state.Change.Next.build(); err == nil {
				v.Next = next
			}
		}
		p.view, p.journaled, p.replicas = v, true, f.state.Ring.Replicas
	}
	f.pub.Store(p)
	if persist {
		if err := f.persistLocked(); err != nil {
			f.logger.Error("persist ring state", "err", err)
		}
	}
	f.notify()
}

func (f *fsm) persistLocked() error {
	if f.path == "" {
		return nil
	}
	b, err := json.Marshal(f.state)
	if err != nil {
		return err
	}
	return store.WriteFileAtomic(f.path, b)
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := json.Marshal(f.state)
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	return fsmSnapshot(b), nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var st fsmState
	if err := json.NewDecoder(rc).Decode(&st); err != nil {
		return fmt.Errorf("decode snapshot: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if st.Index < f.state.Index {
		return nil // the snapshot raft restores at start is older than the local copy
	}
	f.state = st
	f.publishLocked(true)
	return nil
}

type fsmSnapshot []byte

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	return sink.Close()
}

func (s fsmSnapshot) Release() {}
