package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"ringkv/proto/kvpb"
)

// RepairSession is a repair session as raft journals it: its plan, its coordinator and the
// ranges done, so that any member reports it and a restarted coordinator, or another node
// when the coordinator stays down, continues it from the ranges done. Values handed out are
// copies.
type RepairSession struct {
	ID          uint64 `json:"id"`
	Coordinator string `json:"coordinator"`
	// Previous is the coordinator the session was taken over from, if any.
	Previous   string `json:"previous,omitempty"`
	Background bool   `json:"background,omitempty"`
	// Plan is the session's kvpb.RepairPlan, proto-encoded.
	Plan []byte `json:"plan"`
	// Done holds, per plan range index, the kvpb.RangeRepair of a range repaired (proto).
	Done         map[int][]byte `json:"done,omitempty"`
	StartedUnix  int64          `json:"started_unix"`
	FinishedUnix int64          `json:"finished_unix,omitempty"`
	// State is "" while in flight, else the kvpb.RepairState name it ended in.
	State string `json:"state,omitempty"`
	Error string `json:"error,omitempty"`
	// PausedSeconds is the time the session spent paused, up to the last resume.
	PausedSeconds int64 `json:"paused_seconds,omitempty"`
}

// InFlight reports whether the session has not ended.
func (s *RepairSession) InFlight() bool { return s != nil && s.State == "" }

func (s *RepairSession) clone() *RepairSession {
	if s == nil {
		return nil
	}
	cp := *s
	cp.Plan = slices.Clone(s.Plan)
	cp.Done = maps.Clone(s.Done)
	return &cp
}

// Paused is who paused repair, when and why.
type Paused struct {
	By        string `json:"by"`
	Reason    string `json:"reason,omitempty"`
	SinceUnix int64  `json:"since_unix"`
}

// Proto is p on the wire, in the shape of a ring change's pause (nil when not paused).
func (p *Paused) Proto() *kvpb.ChangePause {
	if p == nil {
		return nil
	}
	return &kvpb.ChangePause{By: p.By, Reason: p.Reason, PausedUnix: p.SinceUnix}
}

// RepairJournal is the repair part of the replicated state: the sessions (in flight, and the
// last finished one of each coordinator) and whether repair is paused.
type RepairJournal struct {
	Sessions []*RepairSession `json:"sessions,omitempty"`
	Paused   *Paused          `json:"paused,omitempty"`
	LastID   uint64           `json:"last_id,omitempty"`
}

func (j *RepairJournal) clone() *RepairJournal {
	if j == nil {
		return &RepairJournal{}
	}
	cp := &RepairJournal{LastID: j.LastID}
	for _, s := range j.Sessions {
		cp.Sessions = append(cp.Sessions, s.clone())
	}
	if j.Paused != nil {
		p := *j.Paused
		cp.Paused = &p
	}
	return cp
}

// Session returns the session id, or nil.
func (j *RepairJournal) Session(id uint64) *RepairSession {
	for _, s := range j.Sessions {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// Repair-journal command ops.
const (
	opRepairBegin    = "repair_begin"
	opRepairRange    = "repair_range"
	opRepairEnd      = "repair_end"
	opRepairTakeover = "repair_takeover"
	opRepairPause    = "repair_pause"
	opRepairResume   = "repair_resume"
)

// maxFinishedRepairs bounds the finished sessions kept (the last one of each coordinator).
const maxFinishedRepairs = 16

// repairCmd is a repair-journal command's payload.
type repairCmd struct {
	ID          uint64         `json:"id,omitempty"`
	Coordinator string         `json:"coordinator,omitempty"`
	From        string         `json:"from,omitempty"`
	Session     *RepairSession `json:"session,omitempty"`
	Range       int            `json:"range,omitempty"`
	Result      []byte         `json:"result,omitempty"`
	State       string         `json:"state,omitempty"`
	Error       string         `json:"error,omitempty"`
	Paused      *Paused        `json:"paused,omitempty"`
}

func isRepairOp(op string) bool {
	switch op {
	case opRepairBegin, opRepairRange, opRepairEnd, opRepairTakeover, opRepairPause, opRepairResume:
		return true
	}
	return false
}

// applyRepairLocked applies one repair-journal command to st (the caller holds the fsm's lock).
func applyRepairLocked(st *fsmState, op string, unix int64, rc *repairCmd) applyResult {
	if rc == nil {
		return applyResult{err: fmt.Errorf("%s without a payload: %w", op, ErrInvalidArgument)}
	}
	if st.Repair == nil {
		st.Repair = &RepairJournal{}
	}
	j := st.Repair
	inFlight := func(id uint64, coordinator string) (*RepairSession, error) {
		s := j.Session(id)
		if s == nil || !s.InFlight() {
			return nil, fmt.Errorf("repair %d is not in flight: %w", id, ErrNotCoordinator)
		}
		if coordinator != "" && s.Coordinator != coordinator {
			return nil, fmt.Errorf("repair %d is coordinated by %s, not %s: %w", id, s.Coordinator, coordinator, ErrNotCoordinator)
		}
		return s, nil
	}
	switch op {
	case opRepairBegin:
		s := rc.Session.clone()
		if s == nil || s.Coordinator == "" {
			return applyResult{err: fmt.Errorf("repair begin without a coordinator: %w", ErrInvalidArgument)}
		}
		if j.Paused != nil {
			return applyResult{err: fmt.Errorf("%w by %s: resume it first", ErrRepairPaused, j.Paused.By)}
		}
		// The finished session of this coordinator gives way; one in flight refuses.
		kept := j.Sessions[:0]
		for _, o := range j.Sessions {
			if o.Coordinator == s.Coordinator {
				if o.InFlight() && bytes.Equal(o.Plan, s.Plan) {
					// Journaled by an earlier attempt whose answer was lost when
					// leadership moved (journalRepair retries then).
					return applyResult{changeID: o.ID}
				}
				if o.InFlight() {
					return applyResult{err: fmt.Errorf("repair %d: %w", o.ID, ErrRepairRunning)}
				}
				continue
			}
			kept = append(kept, o)
		}
		j.Sessions = kept
		j.LastID++
		s.ID, s.StartedUnix, s.State = j.LastID, unix, ""
		j.Sessions = append(j.Sessions, s)
		pruneFinished(j)
		return applyResult{changeID: s.ID}
	case opRepairRange:
		s, err := inFlight(rc.ID, rc.Coordinator)
		if err != nil {
			return applyResult{err: err}
		}
		if s.Done == nil {
			s.Done = map[int][]byte{}
		}
		s.Done[rc.Range] = slices.Clone(rc.Result)
		return applyResult{changeID: s.ID}
	case opRepairEnd:
		if s := j.Session(rc.ID); s != nil && !s.InFlight() && s.State == rc.State {
			return applyResult{changeID: s.ID} // an earlier attempt's
		}
		s, err := inFlight(rc.ID, rc.Coordinator)
		if err != nil {
			return applyResult{err: err}
		}
		if rc.State == "" {
			return applyResult{err: fmt.Errorf("repair end without a state: %w", ErrInvalidArgument)}
		}
		if j.Paused != nil {
			s.PausedSeconds += unix - max(j.Paused.SinceUnix, s.StartedUnix)
		}
		s.State, s.Error, s.FinishedUnix = rc.State, rc.Error, unix
		pruneFinished(j)
		return applyResult{changeID: s.ID}
	case opRepairTakeover:
		if s := j.Session(rc.ID); s != nil && s.InFlight() && s.Coordinator == rc.Coordinator && s.Previous == rc.From {
			return applyResult{changeID: s.ID} // an earlier attempt's
		}
		s, err := inFlight(rc.ID, rc.From)
		if err != nil {
			return applyResult{err: err}
		}
		for _, o := range j.Sessions {
			if o.InFlight() && o.Coordinator == rc.Coordinator {
				return applyResult{err: fmt.Errorf("%s coordinates repair %d: %w", rc.Coordinator, o.ID, ErrRepairRunning)}
			}
		}
		s.Previous, s.Coordinator = s.Coordinator, rc.Coordinator
		return applyResult{changeID: s.ID}
	case opRepairPause:
		if p := j.Paused; p != nil && p.By == rc.Paused.GetBy() && p.Reason == rc.Paused.GetReason() && unix-p.SinceUnix < 60 {
			return applyResult{} // an earlier attempt's
		}
		if j.Paused != nil {
			return applyResult{err: fmt.Errorf("%w by %s", ErrRepairAlreadyPaused, j.Paused.By)}
		}
		if !slices.ContainsFunc(j.Sessions, (*RepairSession).InFlight) {
			return applyResult{err: ErrNoRepairToPause}
		}
		p := Paused{By: rc.Paused.GetBy(), Reason: rc.Paused.GetReason(), SinceUnix: unix}
		j.Paused = &p
		return applyResult{}
	case opRepairResume:
		if j.Paused == nil {
			return applyResult{err: ErrRepairNotPaused}
		}
		for _, s := range j.Sessions {
			if s.InFlight() {
				s.PausedSeconds += unix - max(j.Paused.SinceUnix, s.StartedUnix)
			}
		}
		j.Paused = nil
		return applyResult{}
	}
	return applyResult{err: fmt.Errorf("unknown command %q: %w", op, ErrInvalidArgument)}
}

// GetBy and GetReason read a possibly nil Paused.
func (p *Paused) GetBy() string {
	if p == nil {
		return ""
	}
	return p.By
}

func (p *Paused) GetReason() string {
	if p == nil {
		return ""
	}
	return p.Reason
}

// pruneFinished drops the oldest finished sessions beyond maxFinishedRepairs.
func pruneFinished(j *RepairJournal) {
	finished := 0
	for _, s := range j.Sessions {
		if !s.InFlight() {
			finished++
		}
	}
	kept := j.Sessions[:0]
	for _, s := range j.Sessions {
		if !s.InFlight() && finished > maxFinishedRepairs {
			finished--
			continue
		}
		kept = append(kept, s)
	}
	j.Sessions = kept
}

// Repairs is the repair journal as this node has applied it (a copy).
func (c *Cluster) Repairs() *RepairJournal { return c.fsm.load().repair.clone() }

// BeginRepair journals a session coordinated by s.Coordinator and returns its id. Errors:
// ErrRepairRunning (that node coordinates one in flight), ErrRepairPaused, ErrNoLeader.
func (c *Cluster) BeginRepair(ctx context.Context, s *RepairSession) (uint64, error) {
	return c.journalRepair(ctx, opRepairBegin, &repairCmd{Session: s})
}

// RepairRangeDone journals that range i of session id is repaired, with its result (a
// kvpb.RangeRepair, proto). ErrNotCoordinator when coordinator no longer coordinates it.
func (c *Cluster) RepairRangeDone(ctx context.Context, id uint64, coordinator string, i int, result []byte) error {
	_, err := c.journalRepair(ctx, opRepairRange, &repairCmd{ID: id, Coordinator: coordinator, Range: i, Result: result})
	return err
}

// EndRepair journals the end of session id in state (a kvpb.RepairState name).
func (c *Cluster) EndRepair(ctx context.Context, id uint64, coordinator, state, errText string) error {
	_, err := c.journalRepair(ctx, opRepairEnd, &repairCmd{ID: id, Coordinator: coordinator, State: state, Error: errText})
	return err
}

// TakeOverRepair hands session id from coordinator from (gone) to to.
func (c *Cluster) TakeOverRepair(ctx context.Context, id uint64, from, to string) error {
	_, err := c.journalRepair(ctx, opRepairTakeover, &repairCmd{ID: id, From: from, Coordinator: to})
	return err
}

// PauseRepair pauses repair cluster-wide. ErrNoRepairToPause when no session is in flight,
// ErrRepairAlreadyPaused when paused already.
func (c *Cluster) PauseRepair(ctx context.Context, by, reason string) error {
	_, err := c.journalRepair(ctx, opRepairPause, &repairCmd{Paused: &Paused{By: by, Reason: reason}})
	return err
}

// ResumeRepair lifts the pause. ErrRepairNotPaused when repair is not paused.
func (c *Cluster) ResumeRepair(ctx context.Context) error {
	_, err := c.journalRepair(ctx, opRepairResume, &repairCmd{})
	return err
}

// journalRepair appends a repair command on the leader (forwarding when this node follows)
// and returns once this node has applied it.
func (c *Cluster) journalRepair(ctx context.Context, op string, rc *repairCmd) (uint64, error) {
	cmd := command{Op: op, Repair: rc, Unix: time.Now().Unix()}
	var id, index uint64
	err := c.onLeader(ctx, func() error {
		var err error
		id, index, err = c.applyIndexed(cmd)
		return err
	}, func(ctx context.Context, cl kvpb.ClusterClient) error {
		b, err := json.Marshal(cmd)
		if err != nil {
			return err
		}
		resp, err := cl.JournalRepair(ctx, &kvpb.JournalRepairRequest{Command: b})
		id, index = resp.GetId(), resp.GetIndex()
		return err
	})
	if err != nil {
		return 0, err
	}
	return id, c.waitFor(ctx, func(p *published) bool { return p.index >= index })
}

// applyIndexed is apply, with the raft index the command was applied at.
func (c *Cluster) applyIndexed(cmd command) (id, index uint64, err error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return 0, 0, fmt.Errorf("encode %s: %w", cmd.Op, err)
	}
	f := c.raft.Apply(b, c.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		return 0, 0, raftErr(cmd.Op, err)
	}
	res, _ := f.Response().(applyResult)
	return res.changeID, f.Index(), res.err
}

// journalRepairLocal is the leader's end of a forwarded repair command.
func (c *Cluster) journalRepairLocal(b []byte) (id, index uint64, err error) {
	var cmd command
	if err := json.Unmarshal(b, &cmd); err != nil {
		return 0, 0, fmt.Errorf("decode repair command: %w: %w", err, ErrInvalidArgument)
	}
	if !isRepairOp(cmd.Op) {
		return 0, 0, fmt.Errorf("%q is not a repair command: %w", cmd.Op, ErrInvalidArgument)
	}
	return c.applyIndexed(cmd)
}
