package present

import (
	"fmt"

	"ringkv/proto/kvpb"
)

// Pace says what one node's pace of a ring change's streams is and why: "n1 sending: pace
// 12.0 MB/s, backing off: p99 9.1 ms > target 6.0 ms".
func Pace(p *kvpb.Pace) string {
	role := "receiving"
	if p.GetSending() {
		role = "sending"
	}
	return fmt.Sprintf("%s %s: pace %s, %s", p.GetNodeId(), role, Rate(float64(p.GetRateBytes())), PaceWhy(p))
}

// PaceWhy is why a pace is where it is: "backing off: p99 9.1 ms > target 6.0 ms", "slow
// start: p99 3.0 ms ≤ target 6.0 ms, CPU wait 0.4 ms", "backing off: CPU wait 4.1 ms > 3.0 ms
// (half the target), p99 5.2 ms".
func PaceWhy(p *kvpb.Pace) string {
	why := paceReason[p.GetReason()]
	if p.GetTargetMs() <= 0 {
		return why + ": no p99 seen yet"
	}
	if p.GetByCpu() {
		return fmt.Sprintf("%s: CPU wait %.1f ms > %.1f ms (half the target), p99 %.1f ms", why, p.GetCpuWaitMs(), p.GetTargetMs()/2, p.GetP99Ms())
	}
	cmp := "≤"
	if p.GetP99Ms() > p.GetTargetMs() {
		cmp = ">"
	}
	s := fmt.Sprintf("%s: p99 %.1f ms %s target %.1f ms", why, p.GetP99Ms(), cmp, p.GetTargetMs())
	if c := p.GetCpuWaitMs(); c > 0 {
		s += fmt.Sprintf(", CPU wait %.1f ms", c)
	}
	return s
}

var paceReason = map[kvpb.PaceReason]string{
	kvpb.PaceReason_PACE_REASON_UNSPECIFIED: "unknown",
	kvpb.PaceReason_PACE_REASON_GROWING:     "growing",
	kvpb.PaceReason_PACE_REASON_AT_CEILING:  "at ceiling",
	kvpb.PaceReason_PACE_REASON_BACKING_OFF: "backing off",
	kvpb.PaceReason_PACE_REASON_AT_FLOOR:    "at floor",
	kvpb.PaceReason_PACE_REASON_SLOW_START:  "slow start",
	kvpb.PaceReason_PACE_REASON_HOLDING:     "holding after a back-off",
}
