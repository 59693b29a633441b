package tui

import (
	"context"

	"ringkv/proto/kvpb"
)

// Source feeds the console with what the Admin API says about the cluster. Status and Ring
// are unary calls made from tea.Cmds, each under its own deadline, possibly concurrently.
// Stats and Changes are streams: every node's samples (one per node per interval) and the
// progress of the ring change in flight; one tea.Cmd at a time receives from each. Both
// channels are closed when the source stops. Implementations are safe for concurrent use.
type Source interface {
	Status(ctx context.Context) (*kvpb.StatusResponse, error)
	Ring(ctx context.Context) (*kvpb.RingResponse, error)
	Stats() <-chan *kvpb.NodeStats
	Changes() <-chan *kvpb.ChangeProgress
}

// Runner is implemented by sources that own goroutines (streams, reconnects). Run blocks until
// ctx ends; Run(ctx) of the Options' source is started and stopped by tui.Run.
type Runner interface {
	Run(ctx context.Context) error
}

// ProfileResult is a captured CPU profile: the file it was written to and its hottest functions.
type ProfileResult struct {
	Path string
	Top  []string
}

// Actions are what the console can do to the cluster. Each method blocks for at most the RPC
// it makes (StartBench returns once the bench is running); the console calls them from tea.Cmds,
// one at a time. An action the console was not given, or that the node does not implement,
// returns an error wrapping ErrNotAvailable.
type Actions interface {
	// PlanChange dry-runs a ring change (drain = REMOVE, add = ADD, REBALANCE).
	PlanChange(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error)
	// StartChange starts it.
	StartChange(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error)
	// CPUProfile captures seconds of CPU profile on the node at addr, writes it to a file and
	// returns the file and its hottest functions.
	CPUProfile(ctx context.Context, nodeID, addr string, seconds int) (ProfileResult, error)
	// StartBench starts a background load at rate requests per second (replacing a running one);
	// StopBench stops it and returns what it measured in one line ("" when none ran).
	StartBench(ctx context.Context, rate int) error
	StopBench(ctx context.Context) (string, error)
}

// ChangePauser is Actions that can pause the ring change in flight and resume it: both
// journaled in the name of the console's user, each answered with the change's progress.
type ChangePauser interface {
	PauseChange(ctx context.Context, reason string) (*kvpb.ChangeProgress, error)
	ResumeChange(ctx context.Context) (*kvpb.ChangeProgress, error)
}

// RepairPauser is Actions that can pause repair (the sessions in flight wait, and no new
// one starts) and resume it: journaled in the name of the console's user, each answered with
// the session's progress.
type RepairPauser interface {
	PauseRepair(ctx context.Context, reason string) (*kvpb.RepairProgress, error)
	ResumeRepair(ctx context.Context) (*kvpb.RepairProgress, error)
}

// BenchCharter is Actions that can draw the running background bench: p99 and rate per
// second with the cluster's events marked (kvctl bench --chart's chart, live). BenchChart
// returns "" when no bench runs or it has not run two seconds; it does not block.
type BenchCharter interface {
	BenchChart(width, height int) string
}

// Spare is a running node that awaits admission: a plans its add.
type Spare struct {
	ID   string
	Addr string // its gRPC address
}

// NodeControl stops and starts the processes of the cluster's nodes: the demo's, which run
// inside kvctl, so that a node going DOWN, its hints, readiness and repair can be watched.
// StopNode returns once the node has stopped; StartNode once it serves again (or failed to).
// The console calls them from tea.Cmds, one at a time; implementations are safe for
// concurrent use.
type NodeControl interface {
	StopNode(ctx context.Context, id string) error
	StartNode(ctx context.Context, id string) error
}
