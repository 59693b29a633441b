package node

import (
	"time"

	"ringkv/node/stream"
	"ringkv/proto/kvpb"
)

// paceFresh is how recently a pace must have been asked for to be reported: a stream asks
// for every chunk, so a pace not asked for this long paces no stream now.
const paceFresh = 2 * time.Second

// paces is this node's latency paces of ring-change streams in use now, as it pulls (recv)
// and as it serves (send): what kvctl ring status and the console show.
func paces(id string, recv, send stream.PaceState, now time.Time) []*kvpb.Pace {
	var out []*kvpb.Pace
	for _, p := range []struct {
		st      stream.PaceState
		sending bool
	}{{recv, false}, {send, true}} {
		if p.st.Why == 0 || now.Sub(p.st.Used) > paceFresh {
			continue
		}
		out = append(out, &kvpb.Pace{
			NodeId: id, Sending: p.sending, RateBytes: p.st.Rate, LimitBytes: p.st.Limit,
			P99Ms: ms(p.st.Latency), TargetMs: ms(p.st.Target), Reason: paceReason[p.st.Why],
			CpuWaitMs: ms(p.st.CPUWait), ByCpu: p.st.ByCPU,
		})
	}
	return out
}

var paceReason = map[stream.PaceWhy]kvpb.PaceReason{
	stream.PaceGrowing:    kvpb.PaceReason_PACE_REASON_GROWING,
	stream.PaceAtCeiling:  kvpb.PaceReason_PACE_REASON_AT_CEILING,
	stream.PaceBackingOff: kvpb.PaceReason_PACE_REASON_BACKING_OFF,
	stream.PaceAtFloor:    kvpb.PaceReason_PACE_REASON_AT_FLOOR,
	stream.PaceSlowStart:  kvpb.PaceReason_PACE_REASON_SLOW_START,
	stream.PaceHolding:    kvpb.PaceReason_PACE_REASON_HOLDING,
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
