package tui

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/ctl/profile"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// BenchFunc runs a background load at rate requests per second until ctx ends and returns
// what it measured in one line (kvctl runs loadgen.Run and returns its Result's Line).
type BenchFunc func(ctx context.Context, rate int) (string, error)

// AdminActions is the Actions over the Admin gRPC API. Close stops a running bench.
type AdminActions struct {
	// Admin returns a client of any node (ring changes are forwarded to the raft leader).
	Admin func() (kvpb.AdminClient, error)
	// Profile captures a CPU profile of the node at addr, writes it to a file and lists its
	// hottest functions (kvctl wires the capture and top listing of `kvctl pprof`); nil = not
	// available.
	Profile func(ctx context.Context, nodeID, addr string, seconds int) (ProfileResult, error)
	// Bench runs the background bench; nil = not available.
	Bench BenchFunc
	// Chart draws the running bench's chart (BenchCharter); nil = no chart.
	Chart func(width, height int) string

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	result *benchResult // of the running bench, set when done is closed
}

type benchResult struct {
	line string
	err  error
}

var _ Actions = (*AdminActions)(nil)

// NewActions returns the console's actions over f's connections: ring changes through the
// node at f.Addr, CPU profiles captured and listed as `kvctl pprof cpu --top` does, written to
// profileDir, and bench (nil = not available).
func NewActions(f *cli.Factory, profileDir string, bench BenchFunc) *AdminActions {
	return &AdminActions{
		Admin: func() (kvpb.AdminClient, error) { return f.Admin("") },
		Profile: func(ctx context.Context, nodeID, addr string, seconds int) (ProfileResult, error) {
			return captureCPU(ctx, f, profileDir, nodeID, addr, seconds)
		},
		Bench: bench,
	}
}

// captureCPU takes one CPU profile as kvctl pprof does (ctl/profile) and returns its ten hottest
// functions by flat time.
func captureCPU(ctx context.Context, f *cli.Factory, dir, nodeID, addr string, seconds int) (ProfileResult, error) {
	files, err := profile.Capture(ctx, f, []profile.Node{{ID: nodeID, Addr: addr}}, []string{"cpu"}, seconds, dir, "")
	if err != nil {
		return ProfileResult{}, err
	}
	if len(files) == 0 {
		return ProfileResult{}, fmt.Errorf("profile %s: no file written", nodeID)
	}
	rows, _, total, err := profile.TopFile(files[0], 10)
	if err != nil {
		return ProfileResult{Path: files[0]}, err
	}
	res := ProfileResult{Path: files[0]}
	for _, r := range rows {
		res.Top = append(res.Top, fmt.Sprintf("%6.1f%%  %s", float64(r.Flat)*100/float64(max(total, 1)), r.Function))
	}
	if len(res.Top) == 0 {
		res.Top = []string{"(no samples: the node was idle)"}
	}
	return res, nil
}

// PlanChange implements Actions.
func (a *AdminActions) PlanChange(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error) {
	c, err := a.Admin()
	if err != nil {
		return nil, err
	}
	p, err := c.PlanChange(ctx, req)
	if err != nil {
		return nil, rpcError("plan "+present.Change(req), err)
	}
	return p, nil
}

// StartChange implements Actions.
func (a *AdminActions) StartChange(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error) {
	c, err := a.Admin()
	if err != nil {
		return nil, err
	}
	if req.By == "" {
		req.By = cli.Caller() // kept in the change's history; a client certificate's CN wins
	}
	p, err := c.StartChange(ctx, req)
	if err != nil {
		return nil, rpcError("start "+present.Change(req), err)
	}
	return p, nil
}

var _ ChangePauser = (*AdminActions)(nil)

// PauseChange implements ChangePauser, in the name of this kvctl's user.
func (a *AdminActions) PauseChange(ctx context.Context, reason string) (*kvpb.ChangeProgress, error) {
	c, err := a.Admin()
	if err != nil {
		return nil, err
	}
	p, err := c.PauseChange(ctx, &kvpb.PauseChangeRequest{Reason: reason, By: cli.Caller()})
	if err != nil {
		return nil, rpcError("pause the ring change", err)
	}
	return p, nil
}

// ResumeChange implements ChangePauser.
func (a *AdminActions) ResumeChange(ctx context.Context) (*kvpb.ChangeProgress, error) {
	c, err := a.Admin()
	if err != nil {
		return nil, err
	}
	p, err := c.ResumeChange(ctx, &kvpb.ResumeChangeRequest{By: cli.Caller()})
	if err != nil {
		return nil, rpcError("resume the ring change", err)
	}
	return p, nil
}

var _ RepairPauser = (*AdminActions)(nil)

// PauseRepair implements RepairPauser, in the name of this kvctl's user.
func (a *AdminActions) PauseRepair(ctx context.Context, reason string) (*kvpb.RepairProgress, error) {
	c, err := a.Admin()
	if err != nil {
		return nil, err
	}
	p, err := c.PauseRepair(ctx, &kvpb.PauseRepairRequest{Reason: reason, By: cli.Caller()})
	if err != nil {
		return nil, rpcError("pause repair", err)
	}
	return p, nil
}

// ResumeRepair implements RepairPauser.
func (a *AdminActions) ResumeRepair(ctx context.Context) (*kvpb.RepairProgress, error) {
	c, err := a.Admin()
	if err != nil {
		return nil, err
	}
	p, err := c.ResumeRepair(ctx, &kvpb.ResumeRepairRequest{By: cli.Caller()})
	if err != nil {
		return nil, rpcError("resume repair", err)
	}
	return p, nil
}

// CPUProfile implements Actions through Profile.
func (a *AdminActions) CPUProfile(ctx context.Context, nodeID, addr string, seconds int) (ProfileResult, error) {
	if a.Profile == nil {
		return ProfileResult{}, fmt.Errorf("profile %s: %w", nodeID, ErrNotAvailable)
	}
	return a.Profile(ctx, nodeID, addr, seconds)
}

// StartBench implements Actions; it replaces a running bench.
func (a *AdminActions) StartBench(ctx context.Context, rate int) error {
	if a.Bench == nil {
		return fmt.Errorf("bench: %w", ErrNotAvailable)
	}
	if _, err := a.StopBench(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	bctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	res := &benchResult{}
	a.cancel, a.done, a.result = cancel, done, res
	go func() {
		defer close(done)
		res.line, res.err = a.Bench(bctx, rate)
	}()
	return nil
}

var _ BenchCharter = (*AdminActions)(nil)

// BenchChart implements BenchCharter through Chart, while a bench runs.
func (a *AdminActions) BenchChart(width, height int) string {
	a.mu.Lock()
	running := a.cancel != nil
	a.mu.Unlock()
	if !running || a.Chart == nil {
		return ""
	}
	return a.Chart(width, height)
}

// StopBench implements Actions.
func (a *AdminActions) StopBench(ctx context.Context) (string, error) {
	a.mu.Lock()
	cancel, done, res := a.cancel, a.done, a.result
	a.cancel, a.done, a.result = nil, nil, nil
	a.mu.Unlock()
	if cancel == nil {
		return "", nil
	}
	cancel()
	select {
	case <-done:
		if res.err != nil {
			return res.line, fmt.Errorf("bench: %w", res.err)
		}
		return res.line, nil
	case <-ctx.Done():
		return "", fmt.Errorf("stop bench: %w", ctx.Err())
	}
}

// rpcError makes a gRPC error one readable line, "plan remove n1: not available: ..." for an
// RPC the cluster does not implement (it wraps ErrNotAvailable), "plan remove n1:
// unavailable: ..." for other status errors; it keeps err, decoded through the one error
// table (rpcerr.Decode, so it matches the node's sentinel), in the chain.
func rpcError(what string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	return &actionError{what: what, st: st, err: rpcerr.Decode(err)}
}

type actionError struct {
	what string
	st   *status.Status
	err  error
}

func (e *actionError) Error() string {
	if e.st.Code() == codes.Unimplemented {
		return fmt.Sprintf("%s: %s: %s", e.what, ErrNotAvailable, e.st.Message())
	}
	return fmt.Sprintf("%s: %s: %s", e.what, present.Code(e.st.Code()), e.st.Message())
}

func (e *actionError) Unwrap() []error {
	if e.st.Code() == codes.Unimplemented {
		return []error{ErrNotAvailable, e.err}
	}
	return []error{e.err}
}

// Close stops a running bench and waits for it.
func (a *AdminActions) Close() error {
	_, err := a.StopBench(context.Background())
	return err
}
