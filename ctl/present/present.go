// Package present is the one place where kvctl and the console turn the cluster's values
// into the words an operator reads: a ring change and its state, circuit breakers, byte
// sizes, errors and gRPC codes, HLC timestamps. Every surface renders them through here, so
// that one idea has one spelling.
package present

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
)

// Kind names a change's kind as the kvctl command that starts it: "add", "remove",
// "rebalance" ("change" for an unknown kind).
func Kind(k kvpb.ChangeRequest_Kind) string {
	switch k {
	case kvpb.ChangeRequest_ADD:
		return "add"
	case kvpb.ChangeRequest_REMOVE:
		return "remove"
	case kvpb.ChangeRequest_REBALANCE:
		return "rebalance"
	}
	return "change"
}

// Change names a change: "add n4 (10.0.0.4:9090)", "remove n2", "rebalance (3 vnodes)".
func Change(r *kvpb.ChangeRequest) string {
	if r.GetKind() == kvpb.ChangeRequest_REBALANCE {
		if n := len(r.GetTokenMoves()); n > 0 {
			return fmt.Sprintf("rebalance (%d vnodes)", n)
		}
		return "rebalance"
	}
	s := Kind(r.GetKind())
	if r.GetNodeId() != "" {
		s += " " + r.GetNodeId()
	}
	if r.GetGrpcAddr() != "" {
		s += " (" + r.GetGrpcAddr() + ")"
	}
	return s
}

// changeWords and moveWords are the words every surface shows for a change's and a range's
// state.
var (
	changeWords = map[kvpb.ChangeState]string{
		kvpb.ChangeState_CHANGE_STATE_NONE:         "none",
		kvpb.ChangeState_CHANGE_STATE_STREAMING:    "streaming",
		kvpb.ChangeState_CHANGE_STATE_HANDING_OVER: "handing-over",
		kvpb.ChangeState_CHANGE_STATE_DONE:         "done",
		kvpb.ChangeState_CHANGE_STATE_ABORTED:      "aborted",
		kvpb.ChangeState_CHANGE_STATE_PAUSED:       "PAUSED",
	}
	moveWords = map[kvpb.MoveState]string{
		kvpb.MoveState_MOVE_STATE_PENDING:   "pending",
		kvpb.MoveState_MOVE_STATE_STREAMING: "streaming",
		kvpb.MoveState_MOVE_STATE_DONE:      "done",
		kvpb.MoveState_MOVE_STATE_FAILED:    "failed",
	}
)

// State renders a change's state: "none", "streaming", "PAUSED", "handing-over", "done",
// "aborted" (paused in capitals: a change that waits for an operator).
func State(s kvpb.ChangeState) string {
	if w, ok := changeWords[s]; ok {
		return w
	}
	return s.String()
}

// Move renders a range move's state: "pending", "streaming", "done", "failed".
func Move(s kvpb.MoveState) string {
	if w, ok := moveWords[s]; ok {
		return w
	}
	return s.String()
}

// Stall says why a move is stalled and since when ("stalled: source n1 unreachable since
// ..."); "" when it is not.
func Stall(s *kvpb.MoveStall) string {
	if s == nil {
		return ""
	}
	return kvpb.StallLine(s)
}

// StalledRanges is "2 ranges stalled: source n1 unreachable since ...": how many ranges of p
// are stalled and why the first is; "" when none is.
func StalledRanges(p *kvpb.ChangeProgress) string {
	n := p.GetStalledMoves()
	if n == 0 {
		return ""
	}
	word := "ranges"
	if n == 1 {
		word = "range"
	}
	return fmt.Sprintf("%d %s %s", n, word, Stall(FirstStall(p)))
}

// RangeState is a range's state word: "stalled" while it is, else its move state's.
func RangeState(r *kvpb.RangeProgress) string {
	if r.GetStall() != nil {
		return "stalled"
	}
	return Move(r.GetState())
}

// FirstStall is the first stalled range of p (nil when none is).
func FirstStall(p *kvpb.ChangeProgress) *kvpb.MoveStall {
	for _, r := range p.GetRanges() {
		if r.GetStall() != nil {
			return r.GetStall()
		}
	}
	return nil
}

// NoChange tells whether p reports no change at all.
func NoChange(p *kvpb.ChangeProgress) bool {
	return p.GetState() == kvpb.ChangeState_CHANGE_STATE_NONE
}

// InFlight tells whether p is a change that has started and not finished.
func InFlight(p *kvpb.ChangeProgress) bool { return p.GetState().InFlight() }

// openBreakers returns the peers whose breaker is open, sorted.
func openBreakers(bs []*kvpb.BreakerState) []string {
	var open []string
	for _, b := range bs {
		if b.GetState() == kvpb.BreakerState_OPEN {
			open = append(open, b.GetPeer())
		}
	}
	slices.Sort(open)
	return open
}

// Breakers summarises a node's circuit breakers: "ok" when every breaker is closed (or the
// node has none), else the peers whose breaker is open: "open: n2,n3".
func Breakers(bs []*kvpb.BreakerState) string {
	if open := openBreakers(bs); len(open) > 0 {
		return BreakerState(kvpb.BreakerState_OPEN) + ": " + strings.Join(open, ",")
	}
	return "ok"
}

// BreakersShort is Breakers in at most seven cells, for a table column: "ok", the one peer
// whose breaker is open ("open n1"), or how many are open ("2 open").
func BreakersShort(bs []*kvpb.BreakerState) string {
	switch open := openBreakers(bs); {
	case len(open) == 1:
		return BreakerState(kvpb.BreakerState_OPEN) + " " + open[0]
	case len(open) > 1:
		return fmt.Sprintf("%d %s", len(open), BreakerState(kvpb.BreakerState_OPEN))
	}
	return "ok"
}

// Bytes formats a byte count in binary units with one decimal: 512 B, 1.5 KiB, 20.0 MiB.
func Bytes(n uint64) string { return kvpb.FormatBytes(n) }

// BytesShort is Bytes for narrow columns: one decimal below 10, none above: 512 B,
// 1.5 KiB, 600 KiB, 20 MiB, 3.1 GiB.
func BytesShort(v float64) string {
	const unit = 1024
	if v < unit {
		return fmt.Sprintf("%.0f B", max(v, 0))
	}
	exp := 0
	for v >= unit && exp < 5 {
		v /= unit
		exp++
	}
	if v < 9.95 {
		return fmt.Sprintf("%.1f %ciB", v, "BKMGTP"[exp])
	}
	return fmt.Sprintf("%.0f %ciB", v, "BKMGTP"[exp])
}

// MiB is the unit of every streaming rate: 1 MB/s on kvctl's command line and in its output
// is 2^20 bytes per second.
const MiB = 1 << 20

// Rate formats a streaming rate, bytes per second, as MB/s (MiB): "12.5 MB/s".
func Rate(bps float64) string { return fmt.Sprintf("%.1f MB/s", bps/MiB) }

// OneLine is the first line of err's text, for a one-line failure message.
func OneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Code turns a gRPC code into lowercase words: DeadlineExceeded -> "deadline exceeded",
// FailedPrecondition -> "failed precondition".
func Code(c codes.Code) string {
	name := c.String()
	var b strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

// RPC is a gRPC error in words, "unavailable: no leader", or err's first line when it
// carries no status.
func RPC(err error) string {
	if s, ok := status.FromError(err); ok {
		return Code(s.Code()) + ": " + s.Message()
	}
	return OneLine(err)
}

// TokenRange is a vnode's token range (start, end] in hex, 16 digits each, as kvctl prints
// it: "(0e38e38e38e38e38, 1c71c71c71c71c71]".
func TokenRange(start, end uint64) string { return kvpb.FormatTokenRange(start, end) }

// TokenRangeShort is TokenRange in a narrow column: the first 8 hex digits of each bound,
// the same digits TokenRange starts with: "0e38e38e…1c71c71c".
func TokenRangeShort(start, end uint64) string {
	return fmt.Sprintf("%08x…%08x", start>>32, end>>32)
}

// Time is the wall-clock time of an HLC timestamp, in UTC, as RFC 3339 with milliseconds
// when they are not zero.
func Time(ts uint64) string { return kvpb.TimestampString(ts) }
