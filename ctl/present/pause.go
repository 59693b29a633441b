package present

import (
	"fmt"
	"time"

	"ringkv/proto/kvpb"
)

// OpenPause is the pause of a paused change (its last, not resumed), nil otherwise.
func OpenPause(p *kvpb.ChangeProgress) *kvpb.ChangePause {
	ps := p.GetPauses()
	if p.GetState() != kvpb.ChangeState_CHANGE_STATE_PAUSED || len(ps) == 0 || ps[len(ps)-1].GetResumedUnix() != 0 {
		return nil
	}
	return ps[len(ps)-1]
}

// Paused says who paused a change, when, for how long up to now, and why: "PAUSED by
// alice at 16:05:03 UTC (for 4m12s): p99 spike". "" when p is not paused.
func Paused(p *kvpb.ChangeProgress, now time.Time) string {
	return PauseLine(OpenPause(p), now)
}

// RepairPaused is Paused for repair (paused cluster-wide, the session waiting): "PAUSED by
// alice at 16:05:03 UTC (for 4m12s): backup window". "" when not paused.
func RepairPaused(p *kvpb.RepairProgress, now time.Time) string {
	return PauseLine(p.GetPaused(), now)
}

// PauseLine is one pause in force as Paused and RepairPaused show it; "" for nil.
func PauseLine(ps *kvpb.ChangePause, now time.Time) string {
	if ps == nil || ps.GetResumedUnix() != 0 {
		return ""
	}
	at := time.Unix(ps.GetPausedUnix(), 0).UTC()
	s := fmt.Sprintf("PAUSED by %s at %s (for %s)", ps.GetBy(), PauseTime(at, now), Duration(now.Sub(at)))
	if r := ps.GetReason(); r != "" {
		s += ": " + r
	}
	return s
}

// PauseTime is when a pause began: the time of day in UTC, with the date when it is not
// today's.
func PauseTime(at, now time.Time) string {
	at, now = at.UTC(), now.UTC()
	if at.YearDay() == now.YearDay() && at.Year() == now.Year() {
		return at.Format("15:04:05 UTC")
	}
	return at.Format("Jan 2 15:04:05 UTC")
}

// PendingCost is what a change in flight costs each write: "writes wait for ack + 1 pending
// replica". "" when none.
func PendingCost(p *kvpb.ChangeProgress) string {
	switch n := p.GetPendingReplicas(); n {
	case 0:
		return ""
	case 1:
		return "writes wait for ack + 1 pending replica"
	default:
		return fmt.Sprintf("writes wait for ack + %d pending replicas", n)
	}
}

// Throttles says what the operator set for a change beyond its rate: "parallel 2, n4 at
// 5.0 MB/s". "" when only the defaults and the change's rate hold.
func Throttles(p *kvpb.ChangeProgress) string {
	s := ""
	if n := p.GetParallel(); n > 0 {
		s = fmt.Sprintf("parallel %d", n)
	}
	for _, nr := range p.GetNodeRates() {
		if s != "" {
			s += ", "
		}
		s += nr.GetNodeId() + " at " + Limit(nr.GetRateBytes())
	}
	return s
}

// Limit is a streaming throttle: "64.0 MB/s", or "unthrottled" for 0.
func Limit(bytesPerSec uint64) string {
	if bytesPerSec == 0 {
		return "unthrottled"
	}
	return Rate(float64(bytesPerSec))
}
