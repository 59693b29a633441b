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

// PaceWhy is why a pace is where it is: "backing off: p99 9.1 ms > target 6.0 ms", "at
// ceiling: p99 3.0 ms ≤ target 6.0 ms".
func PaceWhy(p *kvpb.Pace) string {
	if p.GetTargetMs() <= 0 {
		return "growing: no p99 seen yet"
	}
	cmp := "≤"
	if p.GetP99Ms() > p.GetTargetMs() {
		cmp = ">"
	}
	return fmt.Sprintf("%s: p99 %.1f ms %s target %.1f ms", paceReason[p.GetReason()], p.GetP99Ms(), cmp, p.GetTargetMs())
}

var paceReason = map[kvpb.PaceReason]string{
	kvpb.PaceReason_PACE_REASON_UNSPECIFIED: "unknown",
	kvpb.PaceReason_PACE_REASON_GROWING:     "growing",
	kvpb.PaceReason_PACE_REASON_AT_CEILING:  "at ceiling",
	kvpb.PaceReason_PACE_REASON_BACKING_OFF: "backing off",
	kvpb.PaceReason_PACE_REASON_AT_FLOOR:    "at floor",
}
