package tui

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// BenchFunc runs a background load at rate requests per second until ctx ends. kvctl wires it
// to loadgen.Run once that library lands.
type BenchFunc func(ctx context.Context, rate int) error

// AdminActions is the Actions over the Admin gRPC API. Close stops a running bench.
type AdminActions struct {
	// Admin returns a client of any node (ring changes are forwarded to the raft leader).
	Admin func() (kvpb.AdminClient, error)
	// Dial returns a client of the node at addr (profiles are captured on that node).
	Dial func(addr string) (kvpb.AdminClient, error)
	// ProfileDir is where CPU profiles are written ("" = the current directory).
	ProfileDir string
	// Bench runs the background bench; nil = not available yet.
	Bench BenchFunc
	// Profile, when set, replaces the built-in CPU profile capture (kvctl wires the same
	// capture and top listing as `kvctl pprof`).
	Profile func(ctx context.Context, nodeID, addr string, seconds int) (ProfileResult, error)

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

var _ Actions = (*AdminActions)(nil)

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
	p, err := c.StartChange(ctx, req)
	if err != nil {
		return nil, rpcError("start "+present.Change(req), err)
	}
	return p, nil
}

// CPUProfile implements Actions: it streams the node's profile into
// ProfileDir/cpu-<node>-<time>.pb.gz and returns its ten hottest functions by flat samples.
func (a *AdminActions) CPUProfile(ctx context.Context, nodeID, addr string, seconds int) (ProfileResult, error) {
	if a.Profile != nil {
		return a.Profile(ctx, nodeID, addr, seconds)
	}
	c, err := a.Dial(addr)
	if err != nil {
		return ProfileResult{}, err
	}
	st, err := c.Profile(ctx, &kvpb.ProfileRequest{Kind: "cpu", Seconds: uint32(seconds)})
	if err != nil {
		return ProfileResult{}, rpcError("profile "+nodeID, err)
	}
	path := filepath.Join(a.ProfileDir, fmt.Sprintf("cpu-%s-%s.pb.gz", nodeID, time.Now().Format("20060102-150405")))
	f, err := os.Create(path)
	if err != nil {
		return ProfileResult{}, fmt.Errorf("profile %s: %w", nodeID, err)
	}
	defer f.Close()
	for {
		ch, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ProfileResult{}, rpcError("profile "+nodeID, err)
		}
		if _, err := f.Write(ch.GetData()); err != nil {
			return ProfileResult{}, fmt.Errorf("profile %s: %w", nodeID, err)
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return ProfileResult{}, fmt.Errorf("profile %s: %w", nodeID, err)
	}
	p, err := profile.Parse(f)
	if err != nil {
		return ProfileResult{Path: path}, fmt.Errorf("parse profile %s: %w", path, err)
	}
	return ProfileResult{Path: path, Top: TopFunctions(p, 10)}, nil
}

// TopFunctions lists the n functions with the most flat samples (the last sample value), as
// "  12.3%  name".
func TopFunctions(p *profile.Profile, n int) []string {
	if len(p.SampleType) == 0 {
		return nil
	}
	vi := len(p.SampleType) - 1
	flat := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		if len(s.Location) == 0 || len(s.Location[0].Line) == 0 || s.Location[0].Line[0].Function == nil {
			continue
		}
		flat[s.Location[0].Line[0].Function.Name] += v
	}
	names := make([]string, 0, len(flat))
	for k := range flat {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if flat[names[i]] != flat[names[j]] {
			return flat[names[i]] > flat[names[j]]
		}
		return names[i] < names[j]
	})
	var out []string
	for i := 0; i < len(names) && i < n; i++ {
		out = append(out, fmt.Sprintf("%6.1f%%  %s", float64(flat[names[i]])*100/float64(max(total, 1)), names[i]))
	}
	if len(out) == 0 {
		out = append(out, "(no samples: the node was idle)")
	}
	return out
}

// StartBench implements Actions; it replaces a running bench.
func (a *AdminActions) StartBench(ctx context.Context, rate int) error {
	if a.Bench == nil {
		return fmt.Errorf("bench: %w (loadgen)", ErrNotAvailable)
	}
	if err := a.StopBench(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	bctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	a.cancel, a.done = cancel, done
	go func() {
		defer close(done)
		_ = a.Bench(bctx, rate)
	}()
	return nil
}

// StopBench implements Actions.
func (a *AdminActions) StopBench(ctx context.Context) error {
	a.mu.Lock()
	cancel, done := a.cancel, a.done
	a.cancel, a.done = nil, nil
	a.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop bench: %w", ctx.Err())
	}
}

// rpcError makes a gRPC error one readable line, "plan drain n1: not available yet: ring
// changes: issue 3" for an RPC the cluster does not implement (it wraps ErrNotAvailable),
// "plan drain n1: unavailable: ..." for other status errors; it keeps err in the chain.
func rpcError(what string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	return &actionError{what: what, st: st, err: err}
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
	return a.StopBench(context.Background())
}
