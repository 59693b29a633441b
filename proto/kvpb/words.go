package kvpb

import (
	"fmt"
	"time"
)

// The words below are spelled the same by the node (its logs, errors and readiness reasons)
// and by kvctl and the console (ctl/present), which import this package and nothing of the
// node: they live here, beside the messages that carry them.

// TimestampLogicalBits is the width of the logical counter in the low bits of a hybrid
// logical clock timestamp (a record's timestamp on the wire); the bits above it are Unix
// milliseconds.
const TimestampLogicalBits = 16

// WallTime is the wall-clock part of the HLC timestamp ts, at millisecond precision.
func WallTime(ts uint64) time.Time { return time.UnixMilli(int64(ts >> TimestampLogicalBits)) }

// TimestampString is the wall-clock time of the HLC timestamp ts in UTC, as RFC 3339 with
// milliseconds when they are not zero.
func TimestampString(ts uint64) string { return WallTime(ts).UTC().Format(time.RFC3339Nano) }

// FormatTokenRange spells the token range (start, end] in hex, 16 digits each:
// "(0e38e38e38e38e38, 1c71c71c71c71c71]".
func FormatTokenRange(start, end uint64) string { return fmt.Sprintf("(%016x, %016x]", start, end) }

// DamagedRanges says that n ranges of a node are marked damaged and wait for their repair
// from the peers (a readiness reason, a NodeInfo problem, kvctl status's note).
func DamagedRanges(n int) string { return fmt.Sprintf("%d ranges damaged, awaiting repair", n) }

// FormatBytes spells a byte count in binary units with one decimal: 512 B, 1.5 KiB, 20.0 MiB.
func FormatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// FormatByteRate spells a pace in bytes per second, "unpaced" for 0 (no limit).
func FormatByteRate(n uint64) string {
	if n == 0 {
		return "unpaced"
	}
	return FormatBytes(n) + "/s"
}

// StallWhy says why a move is stalled and since when, naming the node at fault: "source n1
// unreachable since 2026-11-25T16:40:02Z" (a readiness reason, kvctl ring status, the
// console).
func StallWhy(s *MoveStall) string {
	since := time.Unix(s.GetSinceUnix(), 0).UTC().Format(time.RFC3339)
	src := s.GetSource()
	var what string
	switch s.GetCause() {
	case StallCause_STALL_CAUSE_SOURCE_UNREACHABLE:
		what = fmt.Sprintf("source %s unreachable", src)
	case StallCause_STALL_CAUSE_DISK_FULL:
		what = fmt.Sprintf("receiver %s's disk full", s.GetReceiver())
	case StallCause_STALL_CAUSE_REFUSED:
		what = fmt.Sprintf("refused by %s (%s)", src, s.GetReason())
	case StallCause_STALL_CAUSE_NO_DATA:
		what = fmt.Sprintf("no data from %s", src)
	default:
		what = fmt.Sprintf("pull from %s failing", src)
	}
	line := what + " since " + since
	if e := s.GetError(); e != "" && s.GetCause() != StallCause_STALL_CAUSE_NO_DATA {
		line += ": " + e
	}
	return line
}

// StallLine is "stalled: " and StallWhy's words.
func StallLine(s *MoveStall) string { return "stalled: " + StallWhy(s) }

// StalledMoves says that n range moves into a node are stalled, and why the first is (a
// readiness reason).
func StalledMoves(n int, first *MoveStall) string {
	if n == 1 {
		return "1 range move stalled: " + StallWhy(first)
	}
	return fmt.Sprintf("%d range moves stalled, the first: %s", n, StallWhy(first))
}

// GrayWord names what is wrong with a gray node: "lossy", "slow links", ...
func GrayWord(k GrayNode_Kind) string {
	switch k {
	case GrayNode_LOSS:
		return "lossy"
	case GrayNode_LATENCY:
		return "slow links"
	case GrayNode_UNREACHABLE:
		return "unreachable from its peers"
	case GrayNode_CUT_OFF:
		return "cut off from its peers"
	case GrayNode_SLOW_DISK:
		return "slow disk"
	case GrayNode_FLAPPING:
		return "flapping"
	}
	return "gray"
}

// GrayLine is the one line that names a gray node and what is wrong with it (a readiness
// reason of the node itself, kvctl status's line): "gray: n3 lossy: 31% of 412 calls with
// its peers failed or answered late (over 100ms), none between the others".
func GrayLine(g *GrayNode) string {
	return "gray: " + g.GetNode() + " " + GrayWord(g.GetKind()) + ": " + g.GetDetail()
}
