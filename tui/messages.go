package tui

import (
	"ringkv/proto/kvpb"
)

// Messages. Every RPC runs in a tea.Cmd (commands.go) that returns one of these; the
// source's messages (status, ring, stats, change, tick) are folded into the cluster state
// by its reducer (state.go), the rest drive dialogs and actions (model.go).
type (
	// StatusMsg carries an Admin Status answer.
	StatusMsg struct {
		Resp *kvpb.StatusResponse
		Err  error
	}
	// RingMsg carries an Admin Ring answer.
	RingMsg struct {
		Resp *kvpb.RingResponse
		Err  error
	}
	// StatsMsg is one node's stats sample.
	StatsMsg struct{ Stats *kvpb.NodeStats }
	// ChangeMsg is a progress report of the ring change in flight.
	ChangeMsg struct{ Progress *kvpb.ChangeProgress }
	// TickMsg re-checks the per-node deadlines.
	TickMsg struct{}
	// RefreshMsg asks for Status and Ring again.
	RefreshMsg struct{}
	// PlanMsg is a dry-run plan, to be confirmed.
	PlanMsg struct {
		Req  *kvpb.ChangeRequest
		Plan *kvpb.ChangePlan
		Err  error
	}
	// ChangeStartedMsg answers a confirmed StartChange.
	ChangeStartedMsg struct {
		Plan *kvpb.ChangePlan
		Err  error
	}
	// ProfileMsg answers a CPU profile capture.
	ProfileMsg struct {
		Node   string
		Result ProfileResult
		Err    error
	}
	// BenchMsg answers a bench start (Rate > 0) or stop, with what the stopped bench
	// measured (Result).
	BenchMsg struct {
		Rate   int
		Result string
		Err    error
	}
	// BenchChartMsg is the running bench's chart, drawn for the body's size.
	BenchChartMsg struct{ Chart string }
	// NodeMsg answers a stop (Stop) or start of node ID's process.
	NodeMsg struct {
		ID   string
		Stop bool
		Err  error
	}
	// PauseMsg answers a pause (or, with Resume, a resume) of the ring change.
	PauseMsg struct {
		Resume   bool
		Progress *kvpb.ChangeProgress
		Err      error
	}
	// RepairPauseMsg answers a pause (or, with Resume, a resume) of repair.
	RepairPauseMsg struct {
		Resume   bool
		Progress *kvpb.RepairProgress
		Err      error
	}
	// sourceClosedMsg: a source stream ended.
	sourceClosedMsg struct{ what string }
)

// inputMsg is what the operator typed into an input dialog: what it is for ("add",
// "bench") and the trimmed text.
type inputMsg struct {
	what  string
	value string
}
