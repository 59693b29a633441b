package present

import (
	"fmt"
	"strings"
	"time"

	"ringkv/proto/kvpb"
)

// NoSamples is how a latency quantile over fewer than kvpb.MinLatencySamples samples is shown.
const NoSamples = "–"

// Latency is a latency as kvctl vnodes and the console show it: "850µs", "12.3ms", "1.20s".
func Latency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// LatencyMs is Latency of a latency in milliseconds as the wire carries it; nil is NoSamples.
func LatencyMs(ms *float64) string {
	if ms == nil {
		return NoSamples
	}
	return Latency(time.Duration(*ms * float64(time.Millisecond)))
}

// Quantile is h's q-quantile, or NoSamples when it holds too few samples.
func Quantile(h *kvpb.LatencyHistogram, q float64) string {
	d, ok := h.Quantile(q)
	if !ok {
		return NoSamples
	}
	return Latency(d)
}

// Slow is kvctl status's note for a replica slow for the others: "slow for others: p90 48.0ms
// vs 4.1ms (seen by n1,n2)", and when it held calls past the floor for a share of the window
// (kvpb.StallShare or more), "slow for others: p90 8.0ms vs 1.1ms, held calls 38% of the
// time (seen by n1,n2)".
func Slow(s *kvpb.SlowReplica) string {
	if s == nil {
		return ""
	}
	ms := func(v float64) *float64 { return &v }
	held := ""
	if s.GetStalledShare() >= kvpb.StallShare {
		held = fmt.Sprintf(", held calls %.0f%% of the time", 100*s.GetStalledShare())
	}
	return fmt.Sprintf("slow for others: p90 %s vs %s%s (seen by %s)", LatencyMs(ms(s.GetP90Ms())), LatencyMs(ms(s.GetOthersP90Ms())), held, strings.Join(s.GetSeenBy(), ","))
}
