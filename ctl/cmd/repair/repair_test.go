package repair

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"ringkv/ctl/cli"
	"ringkv/internal/syncbuf"
	"ringkv/proto/kvpb"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		want     Options
		wantCode int
	}{
		{name: "every range", args: nil, want: Options{}},
		{name: "one node, throttled", args: []string{"--node", "n3", "--rate", "20"}, want: Options{NodeID: "n3", RateBytes: 20 << 20}},
		{name: "vnodes repeated and listed", args: []string{"--vnode", "1c71c71c71c71c71", "--vnode", "0x0a,1c71c71c71c71c71"},
			want: Options{Vnodes: []uint64{0x1c71c71c71c71c71, 0x0a}}},
		{name: "dry run, detached", args: []string{"--dry-run", "--detach"}, want: Options{DryRun: true, Detach: true}},
		{name: "plan", args: []string{"plan", "--node", "n2", "--ranges"}, want: Options{NodeID: "n2", PlanOnly: true, Ranges: true}},
		{name: "bad rate", args: []string{"--rate", "fast"}, wantCode: cli.ExitUsage},
		{name: "bad vnode", args: []string{"--vnode", "n2"}, wantCode: cli.ExitUsage},
		{name: "vnode too long", args: []string{"--vnode", "1c71c71c71c71c71c"}, wantCode: cli.ExitUsage},
		{name: "node with an address", args: []string{"--node", "n2=h:1"}, wantCode: cli.ExitUsage},
		{name: "an argument", args: []string{"n2"}, wantCode: cli.ExitUsage},
		{name: "plan takes no dry run", args: []string{"plan", "--dry-run"}, wantCode: cli.ExitUsage},
		{name: "zero interval", args: []string{"--interval", "0s"}, wantCode: cli.ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cli.Test()
			var got *Options
			cmd := NewCmdRepair(cli.NewFactory(ios), func(o *Options) error { got = o; return nil })
			err := cli.ExecuteTest(cmd, ios, tt.args...)
			if code := cli.ExitCode(err); code != tt.wantCode {
				// cobra's own argument errors are plain errors; they still fail the command.
				if !(tt.wantCode == cli.ExitUsage && err != nil) {
					t.Fatalf("got exit %d (%v), want %d", code, err, tt.wantCode)
				}
			}
			if tt.wantCode != 0 {
				return
			}
			if got.NodeID != tt.want.NodeID || !slices.Equal(got.Vnodes, tt.want.Vnodes) || got.DryRun != tt.want.DryRun ||
				got.RateBytes != tt.want.RateBytes || got.Detach != tt.want.Detach || got.PlanOnly != tt.want.PlanOnly || got.Ranges != tt.want.Ranges {
				t.Errorf("got node=%q vnodes=%x dry=%v rate=%d detach=%v plan=%v ranges=%v, want node=%q vnodes=%x dry=%v rate=%d detach=%v plan=%v ranges=%v",
					got.NodeID, got.Vnodes, got.DryRun, got.RateBytes, got.Detach, got.PlanOnly, got.Ranges,
					tt.want.NodeID, tt.want.Vnodes, tt.want.DryRun, tt.want.RateBytes, tt.want.Detach, tt.want.PlanOnly, tt.want.Ranges)
			}
			if req := got.request(); req.GetNodeId() != tt.want.NodeID || req.GetDryRun() != tt.want.DryRun || req.GetRateBytes() != tt.want.RateBytes {
				t.Errorf("got request %v, want it to carry the flags", req)
			}
		})
	}
}

// fakeAdmin answers the repair RPCs from canned values and records what it was asked.
type fakeAdmin struct {
	kvpb.AdminClient
	plan       *kvpb.RepairPlan
	planErr    error
	startErr   error
	startPlan  *kvpb.RepairPlan // StartRepair's answer when it differs from the plan
	watch      []*kvpb.RepairProgress
	block      bool // after watch, Recv waits for the context
	status     *kvpb.RepairProgress
	statusResp *kvpb.StatusResponse
	others     map[string]*fakeAdmin // by address
	started    []*kvpb.RepairRequest
	aborted    int
}

func (f *fakeAdmin) PlanRepair(_ context.Context, req *kvpb.RepairRequest, _ ...grpc.CallOption) (*kvpb.RepairPlan, error) {
	if f.planErr != nil {
		return nil, f.planErr
	}
	p := proto.Clone(f.plan).(*kvpb.RepairPlan)
	p.Request = req
	return p, nil
}

func (f *fakeAdmin) StartRepair(_ context.Context, req *kvpb.RepairRequest, _ ...grpc.CallOption) (*kvpb.RepairPlan, error) {
	f.started = append(f.started, req)
	if f.startErr != nil {
		return nil, f.startErr
	}
	src := f.plan
	if f.startPlan != nil {
		src = f.startPlan
	}
	p := proto.Clone(src).(*kvpb.RepairPlan)
	p.Id, p.Request = 9, req
	return p, nil
}

func (f *fakeAdmin) RepairStatus(context.Context, *kvpb.RepairStatusRequest, ...grpc.CallOption) (*kvpb.RepairProgress, error) {
	if f.status == nil {
		return &kvpb.RepairProgress{}, nil
	}
	return f.status, nil
}

func (f *fakeAdmin) Status(context.Context, *kvpb.StatusRequest, ...grpc.CallOption) (*kvpb.StatusResponse, error) {
	if f.statusResp == nil {
		return nil, status.Error(codes.Unavailable, "no status")
	}
	return f.statusResp, nil
}

func (f *fakeAdmin) AbortRepair(context.Context, *kvpb.AbortRepairRequest, ...grpc.CallOption) (*kvpb.RepairProgress, error) {
	f.aborted++
	p := proto.Clone(f.status).(*kvpb.RepairProgress)
	p.State = kvpb.RepairState_REPAIR_STATE_ABORTED
	f.status = p
	return p, nil
}

func (f *fakeAdmin) WatchRepair(ctx context.Context, _ *kvpb.RepairStatusRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[kvpb.RepairProgress], error) {
	return &fakeStream{ctx: ctx, msgs: f.watch, block: f.block}, nil
}

type fakeStream struct {
	grpc.ClientStream
	ctx   context.Context
	msgs  []*kvpb.RepairProgress
	block bool
}

func (s *fakeStream) Recv() (*kvpb.RepairProgress, error) {
	if len(s.msgs) == 0 {
		if s.block {
			<-s.ctx.Done()
			return nil, status.FromContextError(s.ctx.Err()).Err()
		}
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

func fakeDeps(ios *cli.IOStreams, fa *fakeAdmin, jsonOut bool) Deps {
	return cli.TestAdminDeps(ios, func(addr string) (kvpb.AdminClient, error) {
		if o := fa.others[addr]; o != nil {
			return o, nil
		}
		return fa, nil
	}, jsonOut)
}

// repairPlan is a plan over n ranges of n1..n3 (RF 3), each est 100 keys / 10 KiB.
func repairPlan(n int) *kvpb.RepairPlan {
	p := &kvpb.RepairPlan{Epoch: 4, Pairs: []string{"n1/n2", "n1/n3", "n2/n3"}, EstKeys: uint64(100 * n), EstBytes: uint64(10 << 10 * n)}
	ids := []string{"n1", "n2", "n3"}
	step := uint64(1) << 56
	for i := range n {
		reps := []string{ids[i%3], ids[(i+1)%3], ids[(i+2)%3]}
		p.Ranges = append(p.Ranges, &kvpb.RepairRange{Start: uint64(i) * step, End: uint64(i+1) * step, Replicas: reps, EstKeys: 100, EstBytes: 10 << 10})
	}
	return p
}

// progressOf is session 9 of plan with done ranges done; n3 missed 5 keys of each range
// done, which the other two stream to it.
func progressOf(p *kvpb.RepairPlan, state kvpb.RepairState, done int) *kvpb.RepairProgress {
	pp := &kvpb.RepairProgress{Id: 9, State: state, Plan: p, Coordinator: "n1", RangesTotal: uint32(len(p.GetRanges())), RangesDone: uint32(done),
		StartedUnix: 1000, RateLimitBytes: 20 << 20}
	sum := map[string]*kvpb.PairRepair{}
	for _, s := range p.GetPairs() {
		a, b, _ := strings.Cut(s, "/")
		sum[s] = &kvpb.PairRepair{A: a, B: b}
		pp.Pairs = append(pp.Pairs, sum[s])
	}
	for i, r := range p.GetRanges() {
		rr := &kvpb.RangeRepair{Range: r, State: kvpb.RangeRepairState_RANGE_REPAIR_STATE_PENDING}
		if i < done {
			rr.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE
			for _, s := range p.GetPairs() {
				a, b, _ := strings.Cut(s, "/")
				pr := &kvpb.PairRepair{A: a, B: b, LeavesCompared: 64}
				if b == "n3" {
					pr.LeavesMismatched, pr.KeysToB, pr.BytesStreamed = 2, 5, 500
				}
				rr.Pairs = append(rr.Pairs, pr)
				t := sum[s]
				t.LeavesCompared += pr.LeavesCompared
				t.LeavesMismatched += pr.LeavesMismatched
				t.KeysToB += pr.KeysToB
				t.BytesStreamed += pr.BytesStreamed
				pp.KeysStreamed += pr.KeysToB
				pp.BytesStreamed += pr.BytesStreamed
			}
		} else if i == done {
			rr.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_COMPARING
		}
		pp.Ranges = append(pp.Ranges, rr)
	}
	if state.Finished() {
		pp.FinishedUnix = 1004
	}
	return pp
}

func TestRepairFollowsTheSession(t *testing.T) {
	plan := repairPlan(4)
	fa := &fakeAdmin{plan: plan, watch: []*kvpb.RepairProgress{
		progressOf(plan, kvpb.RepairState_REPAIR_STATE_RUNNING, 1),
		progressOf(plan, kvpb.RepairState_REPAIR_STATE_RUNNING, 2),
		progressOf(plan, kvpb.RepairState_REPAIR_STATE_DONE, 4),
	}}
	ios, _, out, errOut := cli.Test()
	o := &Options{Deps: fakeDeps(ios, fa, false), NodeID: "n3", RateBytes: 20 << 20, Interval: time.Second, Reconnect: time.Second}
	if err := runRepair(context.Background(), o); err != nil {
		t.Fatalf("repair: %v\nstderr:\n%s", err, errOut)
	}
	if len(fa.started) != 1 || fa.started[0].GetNodeId() != "n3" || fa.started[0].GetRateBytes() != 20<<20 || fa.started[0].GetDryRun() {
		t.Fatalf("got StartRepair calls %v, want one for n3 at 20 MiB/s", fa.started)
	}
	for _, want := range []string{
		"plan: repair n3's ranges, ring epoch 4",
		"ranges: 4, est. 400 keys, 40.0 KiB",
		"(0000000000000000, 0100000000000000]\tn1,n2,n3\t100\t10.0 KiB",
		"replica pairs compared: 3 (n1/n2, n1/n3, n2/n3)",
		"streaming throttle: 20.0 MB/s per receiving node",
		"repair #9 done: n3's ranges; 2 of 3 pairs differed in 16 of 768 leaves, 40 keys repaired, 3.9 KiB streamed in 4s",
		"PAIR\tLEAVES\tMISMATCHED\tKEYS A->B\tKEYS B->A\tBYTES",
		"n1/n3\t256\t8\t20 to n3\t0 to n1\t2.0 KiB",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// Piped: a start line, at most one line a second, and the final one.
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if !strings.Contains(lines[0], "repair 9 started on 127.0.0.1:9091: n3's ranges, 4 ranges, 3 replica pairs") {
		t.Errorf("got first stderr line %q, want the start", lines[0])
	}
	last := lines[len(lines)-1]
	for _, want := range []string{"repair 9 done 100%", "ranges 4/4", "streamed 40 keys, 3.9 KiB", "n3 4/4 ranges, 40 keys in"} {
		if !strings.Contains(last, want) {
			t.Errorf("got last progress line %q, want %q", last, want)
		}
	}
	if strings.Contains(errOut.String(), "\x1b[") {
		t.Errorf("got terminal escapes on a piped stderr:\n%q", errOut)
	}
}

func TestRepairOutcomes(t *testing.T) {
	failed := progressOf(repairPlan(2), kvpb.RepairState_REPAIR_STATE_FAILED, 2)
	failed.Ranges[1].State, failed.Ranges[1].Error = kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED, "n2: unavailable"
	failed.Error = "1 range failed"
	tests := []struct {
		name      string
		plan      *kvpb.RepairPlan
		planErr   error
		startErr  error
		startPlan *kvpb.RepairPlan
		final     *kvpb.RepairProgress
		wantCode  int
		wantStart bool
		wantText  string // in the error or stdout
	}{
		{name: "done", final: progressOf(repairPlan(2), kvpb.RepairState_REPAIR_STATE_DONE, 2), wantStart: true, wantText: "repair #9 done"},
		{name: "a ring change in flight", plan: &kvpb.RepairPlan{Refusals: []string{"ring change 3 (add n4) is in flight"}},
			wantCode: cli.ExitRefused, wantText: "refused: ring change 3"},
		{name: "refused at the start", startPlan: &kvpb.RepairPlan{Refusals: []string{"ring change 4 started"}},
			wantCode: cli.ExitRefused, wantStart: true, wantText: "ring change 4 started"},
		{name: "a session in flight", startErr: status.Error(codes.FailedPrecondition, "repair 8 is in flight"),
			wantCode: cli.ExitRefused, wantStart: true, wantText: "repair 8 is in flight"},
		{name: "old node", planErr: status.Error(codes.Unimplemented, "unknown method PlanRepair"),
			wantCode: cli.ExitFailure, wantText: "node 127.0.0.1:9091: repair is not implemented: its kvnode predates repair"},
		{name: "cluster down", planErr: status.Error(codes.Unavailable, "connection refused"), wantCode: cli.ExitFailure, wantText: "unavailable"},
		{name: "failed", final: failed, wantCode: cli.ExitFailure, wantStart: true, wantText: "repair 9 failed: 1 range failed"},
		{name: "aborted", final: progressOf(repairPlan(2), kvpb.RepairState_REPAIR_STATE_ABORTED, 1), wantCode: cli.ExitFailure, wantStart: true,
			wantText: "repair 9 was aborted"},
		{name: "nothing to repair", plan: &kvpb.RepairPlan{Epoch: 4}, wantText: "nothing to repair"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := tt.plan
			if plan == nil {
				plan = repairPlan(2)
			}
			fa := &fakeAdmin{plan: plan, planErr: tt.planErr, startErr: tt.startErr, startPlan: tt.startPlan}
			if tt.final != nil {
				fa.watch = []*kvpb.RepairProgress{tt.final}
			}
			ios, _, out, _ := cli.Test()
			o := &Options{Deps: fakeDeps(ios, fa, false), Interval: time.Second, Reconnect: time.Second}
			err := runRepair(context.Background(), o)
			if code := cli.ExitCode(err); code != tt.wantCode {
				t.Fatalf("got exit %d (%v), want %d", code, err, tt.wantCode)
			}
			if started := len(fa.started) > 0; started != tt.wantStart {
				t.Errorf("got started=%v, want %v", started, tt.wantStart)
			}
			if said := fmt.Sprint(err) + "\n" + out.String(); !strings.Contains(said, tt.wantText) {
				t.Errorf("got error %v and output:\n%s\nwant them to mention %q", err, out, tt.wantText)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("got a multi-line error %q, want one line", err)
			}
			if tt.planErr != nil && status.Code(tt.planErr) == codes.Unimplemented && !errors.Is(err, ErrUnimplemented) {
				t.Errorf("got %v, want ErrUnimplemented", err)
			}
		})
	}
	// The failed session lists the range that failed, with its error.
	ios, _, out, _ := cli.Test()
	if err := PrintResult(ios, failed, false); err != nil {
		t.Fatal(err)
	}
	if want := "(0100000000000000, 0200000000000000]\tn2,n3,n1\tfailed\t4\t10\tn2: unavailable"; !strings.Contains(out.String(), "ranges that failed: 1") || !strings.Contains(out.String(), want) {
		t.Errorf("got result:\n%s\nwant the failed range %q", out, want)
	}
}

// TestDryRun: --dry-run starts a session that streams nothing, and lists the ranges whose
// replicas differ.
func TestDryRun(t *testing.T) {
	plan := repairPlan(3)
	final := progressOf(plan, kvpb.RepairState_REPAIR_STATE_DONE, 3)
	fa := &fakeAdmin{plan: plan, watch: []*kvpb.RepairProgress{final}}
	ios, _, out, _ := cli.Test()
	o := &Options{Deps: fakeDeps(ios, fa, false), DryRun: true, Interval: time.Second, Reconnect: time.Second}
	final.Plan = proto.Clone(plan).(*kvpb.RepairPlan)
	final.Plan.Request = o.request()
	if err := runRepair(context.Background(), o); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if len(fa.started) != 1 || !fa.started[0].GetDryRun() {
		t.Fatalf("got StartRepair calls %v, want one dry run", fa.started)
	}
	for _, want := range []string{"plan: repair every range (dry run)", "nothing streamed (dry run)", "ranges whose replicas differ: 3",
		"(0000000000000000, 0100000000000000]\tn1,n2,n3\tdone\t4\t10\t"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanOnly: kvctl repair plan asks for the plan and starts nothing; -o json is the plan.
func TestPlanOnly(t *testing.T) {
	fa := &fakeAdmin{plan: repairPlan(20)}
	ios, _, out, _ := cli.Test()
	if err := runRepair(context.Background(), &Options{Deps: fakeDeps(ios, fa, false), PlanOnly: true}); err != nil {
		t.Fatalf("plan: %v", err)
	}
	// 20 ranges: summarised per replica set.
	for _, want := range []string{"ranges: 20, est. 2000 keys", "REPLICAS\tRANGES\tEST-KEYS\tEST-BYTES", "n1,n2,n3\t7\t700\t70.0 KiB", "--ranges lists every range"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	ios, _, out, _ = cli.Test()
	if err := runRepair(context.Background(), &Options{Deps: fakeDeps(ios, fa, true), PlanOnly: true, NodeID: "n2"}); err != nil {
		t.Fatalf("plan json: %v", err)
	}
	var got struct {
		Ranges  []struct{ Replicas []string } `json:"ranges"`
		EstKeys uint64                        `json:"est_keys"`
		Request struct {
			NodeID string `json:"node_id"`
		} `json:"request"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if len(got.Ranges) != 20 || got.EstKeys != 2000 || got.Request.NodeID != "n2" {
		t.Errorf("got %d ranges, %d keys, node %q; want 20, 2000, n2", len(got.Ranges), got.EstKeys, got.Request.NodeID)
	}
	if len(fa.started) != 0 {
		t.Errorf("got %d StartRepair calls, want none", len(fa.started))
	}
}

// TestJSONResult: under -o json stdout is one document, the final progress; the plan went
// to stderr.
func TestJSONResult(t *testing.T) {
	plan := repairPlan(2)
	fa := &fakeAdmin{plan: plan, watch: []*kvpb.RepairProgress{progressOf(plan, kvpb.RepairState_REPAIR_STATE_DONE, 2)}}
	ios, _, out, errOut := cli.Test()
	if err := runRepair(context.Background(), &Options{Deps: fakeDeps(ios, fa, true), Interval: time.Second, Reconnect: time.Second}); err != nil {
		t.Fatalf("repair: %v", err)
	}
	var got struct {
		ID    uint64 `json:"id"`
		State string `json:"state"`
		Pairs []struct {
			A, B             string
			LeavesMismatched uint64 `json:"leaves_mismatched"`
		} `json:"pairs"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if got.ID != 9 || got.State != "REPAIR_STATE_DONE" || len(got.Pairs) != 3 || got.Pairs[2].LeavesMismatched != 4 {
		t.Errorf("got %+v, want session 9 done with 3 pairs", got)
	}
	if !strings.Contains(errOut.String(), "plan: repair every range") {
		t.Errorf("got stderr:\n%s\nwant the plan there", errOut)
	}
}

// TestInterrupted: Ctrl-C while watching says the repair goes on and how to watch or abort it.
func TestInterrupted(t *testing.T) {
	plan := repairPlan(2)
	fa := &fakeAdmin{plan: plan, watch: []*kvpb.RepairProgress{progressOf(plan, kvpb.RepairState_REPAIR_STATE_RUNNING, 1)}, block: true}
	ios, _, _, _ := cli.Test()
	errOut := &syncbuf.Buffer{}
	ios.ErrOut = errOut
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runRepair(ctx, &Options{Deps: fakeDeps(ios, fa, false), Interval: time.Second, Reconnect: time.Second})
	}()
	// Cancel once the session has started; the fake watch then blocks until the context ends.
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("repair ended before the interrupt: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the session never started")
		}
		if strings.Contains(errOut.String(), "repair 9 started") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	err := <-done
	if cli.ExitCode(err) != cli.ExitFailure || !errors.Is(err, errInterrupted) {
		t.Errorf("got %v (exit %d), want errInterrupted, exit 1", err, cli.ExitCode(err))
	}
	for _, want := range []string{"repair 9 goes on", "kvctl repair status --watch --addr 127.0.0.1:9091", "kvctl repair abort --addr 127.0.0.1:9091"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// TestStatusAndAbort: status and abort find a session in flight on another member through
// Status, and abort waits until the coordinator reports it aborted.
func TestStatusAndAbort(t *testing.T) {
	plan := repairPlan(4)
	plan.Request = &kvpb.RepairRequest{NodeId: "n3"}
	running := progressOf(plan, kvpb.RepairState_REPAIR_STATE_RUNNING, 2)
	running.Coordinator = "n2"
	n2 := &fakeAdmin{status: running}
	here := &fakeAdmin{
		status: progressOf(plan, kvpb.RepairState_REPAIR_STATE_DONE, 4), // n1's last session
		statusResp: &kvpb.StatusResponse{Repairs: []*kvpb.RepairProgress{running},
			Nodes: []*kvpb.NodeStatus{{Id: "n1", GrpcAddr: "127.0.0.1:9091"}, {Id: "n2", GrpcAddr: "127.0.0.1:9092"}}},
		others: map[string]*fakeAdmin{"127.0.0.1:9092": n2},
	}
	ios, _, out, _ := cli.Test()
	if err := runStatus(context.Background(), &StatusOptions{Deps: fakeDeps(ios, here, false), Ranges: true, Interval: time.Second}); err != nil {
		t.Fatalf("status: %v", err)
	}
	for _, want := range []string{"coordinated by n2 (127.0.0.1:9092)", "repair #9 on n2: n3's ranges, comparing, ranges 2/4 (50%)",
		"NODE\tRANGES\tKEYS-IN\tNOTE", "n3\t2/4\t20\t", "comparing"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out.Reset()
	if err := runAbort(context.Background(), &AbortOptions{Deps: fakeDeps(ios, here, false)}); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if n2.aborted != 1 || here.aborted != 0 {
		t.Errorf("got aborts n2=%d here=%d, want the coordinator n2 once", n2.aborted, here.aborted)
	}
	if want := "repair 9 (n3's ranges) aborted after 2 of 4 ranges"; !strings.Contains(out.String(), want) {
		t.Errorf("got %q, want %q", out, want)
	}
	// Nothing in flight anywhere: abort says so and fails.
	here.statusResp.Repairs = nil
	if err := runAbort(context.Background(), &AbortOptions{Deps: fakeDeps(ios, here, false)}); !errors.Is(err, errNoRepair) {
		t.Errorf("abort with nothing in flight: got %v, want %v", err, errNoRepair)
	}
	// No session ever: status says so.
	out.Reset()
	if err := runStatus(context.Background(), &StatusOptions{Deps: fakeDeps(ios, &fakeAdmin{}, false), Interval: time.Second}); err != nil {
		t.Fatalf("status: %v", err)
	}
	if !strings.Contains(out.String(), "no repair has run on this node") {
		t.Errorf("got %q, want no repair", out)
	}
}

// TestRendererFits: on a 60-column terminal no line is wider than 59 columns, and a redraw
// moves the cursor up over the lines drawn before.
func TestRendererFits(t *testing.T) {
	plan := repairPlan(6)
	var buf bytes.Buffer
	now := time.Unix(1010, 0)
	r := &Renderer{W: &buf, TTY: true, Width: func() int { return 60 }, Every: time.Second, Now: func() time.Time { return now }}
	r.Update(progressOf(plan, kvpb.RepairState_REPAIR_STATE_RUNNING, 1), false)
	now = now.Add(time.Second)
	r.Update(progressOf(plan, kvpb.RepairState_REPAIR_STATE_RUNNING, 3), false)
	s := buf.String()
	if !strings.Contains(s, "\x1b[4A") {
		t.Errorf("got no cursor-up over the 4 lines drawn:\n%q", s)
	}
	for _, l := range strings.Split(s, "\r\x1b[2K") {
		l = strings.TrimSuffix(strings.TrimPrefix(l, "\x1b[4A"), "\n")
		if w := utf8.RuneCountInString(l); w > 59 {
			t.Errorf("got a line of %d columns on a 60-column terminal: %q", w, l)
		}
	}
	// The ETA comes from the ranges: 3 of 6 done in 11s since the start.
	wide := &Renderer{Now: func() time.Time { return now }}
	if got, want := wide.Line(progressOf(plan, kvpb.RepairState_REPAIR_STATE_RUNNING, 3), now), "repair 9 comparing 50%  ranges 3/6  0.0 MB/s  ETA 11s"; !strings.HasPrefix(got, want) {
		t.Errorf("got %q, want it to start %q", got, want)
	}
}
