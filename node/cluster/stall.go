package cluster

import (
	"errors"
	"strings"
	"time"

	"ringkv/node/store"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// A move this node receives is stalled when it has made no progress (no record applied) for
// MoverConfig.StallAfter since its pull began or last made some (or since the change was last
// resumed; a paused change is not stalled). Its cause is read from the
// pull's last error: the receiver's full disk, a refusal the source answered (an error whose
// reason is a live peer's: rpcerr's Alive), a failure to reach the source, or, while the
// pull is open without an error, no data arriving from the source (a stopped process).

// stallOf returns p's stall at now, or nil when it is not stalled.
func (m *Mover) stallOf(p *MoveProgress, now time.Time) *kvpb.MoveStall {
	if m.cfg.StallAfter <= 0 || p.State == MoveDone || p.progressed.IsZero() {
		return nil
	}
	ch := m.c.fsm.load().change
	if ch == nil || ch.ID != p.ChangeID || ch.Moves[p.Index].Done {
		return nil // a move of a change ended, or one raft has done
	}
	if ch.Paused() != nil {
		return nil // a paused change makes no progress by the operator's will
	}
	// The time paused does not count: the clock starts again at the last resume.
	since := p.progressed
	if n := len(ch.Pauses); n > 0 {
		if r := time.Unix(ch.Pauses[n-1].ResumedUnix, 0); r.After(since) {
			since = r
		}
	}
	if now.Sub(since) < m.cfg.StallAfter {
		return nil
	}
	s := &kvpb.MoveStall{Source: p.Source, Receiver: m.c.cfg.ID, SinceUnix: since.Unix()}
	if s.Source == "" {
		s.Source = p.Move.Source
	}
	if err := p.lastErr; err != nil {
		s.Error = oneLine(err.Error())
		s.Cause, s.Reason = stallCause(err)
	} else {
		s.Cause = kvpb.StallCause_STALL_CAUSE_NO_DATA
	}
	return s
}

// stallCause classifies the last error of a stalled pull by the reasons it carries, and
// names the reason on the wire that decided it ("" when none did).
func stallCause(err error) (kvpb.StallCause, string) {
	switch {
	case errors.Is(err, store.ErrDiskFull):
		// This node's: a source streams reads, which a full disk does not refuse.
		return kvpb.StallCause_STALL_CAUSE_DISK_FULL, rpcerr.Name(kvpb.Reason_REASON_DISK_FULL)
	case errors.Is(err, ErrUnknownMember):
		// No source in this node's ring to pull from.
		return kvpb.StallCause_STALL_CAUSE_FAILING, rpcerr.Name(kvpb.Reason_REASON_UNKNOWN_MEMBER)
	case rpcerr.Alive(err):
		return kvpb.StallCause_STALL_CAUSE_REFUSED, aliveReason(err)
	}
	// Unavailable, a deadline, a refused connection, a transport failure without a reason:
	// the source did not answer.
	reason := ""
	if r := rpcerr.ReasonOf(err); r != kvpb.Reason_REASON_UNSPECIFIED {
		reason = rpcerr.Name(r)
	}
	return kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE, reason
}

// aliveReason is the name of the first reason err carries that a live peer answers.
func aliveReason(err error) string {
	for _, row := range rpcerr.Rows() {
		if row.Alive && errors.Is(err, rpcerr.Sentinel(row.Reason)) {
			return rpcerr.Name(row.Reason)
		}
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
