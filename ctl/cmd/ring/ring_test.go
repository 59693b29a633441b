package ring

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

func TestChangeFlags(t *testing.T) {
	tests := []struct {
		name     string
		cmd      func(*cli.Factory, func(*ChangeOptions) error) *cobra.Command
		args     []string
		tty      bool
		wantID   string
		wantAddr string
		wantRate uint64
		wantDry  bool
		wantCode int
	}{
		{name: "add", cmd: NewCmdAdd, args: []string{"n4=127.0.0.1:9094", "--yes"}, wantID: "n4", wantAddr: "127.0.0.1:9094"},
		{name: "add rate", cmd: NewCmdAdd, args: []string{"n4=h:1", "-y", "--rate", "2.5"}, wantID: "n4", wantAddr: "h:1", wantRate: 5 * present.MiB / 2},
		{name: "add dry run without yes", cmd: NewCmdAdd, args: []string{"n4=h:1", "--dry-run"}, wantID: "n4", wantAddr: "h:1", wantDry: true},
		{name: "add prompt on a terminal", cmd: NewCmdAdd, args: []string{"n4=h:1"}, tty: true, wantID: "n4", wantAddr: "h:1"},
		{name: "add without yes when piped", cmd: NewCmdAdd, args: []string{"n4=h:1"}, wantCode: cli.ExitUsage},
		{name: "add no address", cmd: NewCmdAdd, args: []string{"n4", "--yes"}, wantCode: cli.ExitUsage},
		{name: "add empty id", cmd: NewCmdAdd, args: []string{"=h:1", "--yes"}, wantCode: cli.ExitUsage},
		{name: "add bad rate", cmd: NewCmdAdd, args: []string{"n4=h:1", "--yes", "--rate", "fast"}, wantCode: cli.ExitUsage},
		{name: "add two args", cmd: NewCmdAdd, args: []string{"n4=h:1", "n5=h:2", "--yes"}, wantCode: cli.ExitUsage},
		{name: "remove", cmd: NewCmdRemove, args: []string{"n2", "--yes", "--rate", "512KB/s"}, wantID: "n2", wantRate: 512 << 10},
		{name: "remove with address", cmd: NewCmdRemove, args: []string{"n2=h:1", "--yes"}, wantCode: cli.ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cli.Test()
			ios.InTTY = tt.tty
			var got *ChangeOptions
			cmd := tt.cmd(cli.NewFactory(ios), func(o *ChangeOptions) error { got = o; return nil })
			err := cli.ExecuteTest(cmd, ios, tt.args...)
			if code := cli.ExitCode(err); code != tt.wantCode {
				// cobra's own argument-count errors are plain errors; they still fail the command.
				if !(tt.wantCode == cli.ExitUsage && err != nil && strings.Contains(err.Error(), "arg")) {
					t.Fatalf("got exit %d (%v), want %d", code, err, tt.wantCode)
				}
			}
			if tt.wantCode != 0 {
				return
			}
			if got.NodeID != tt.wantID || got.NodeAddr != tt.wantAddr || got.RateBytes != tt.wantRate || got.DryRun != tt.wantDry {
				t.Errorf("got id=%q addr=%q rate=%d dry=%v, want id=%q addr=%q rate=%d dry=%v",
					got.NodeID, got.NodeAddr, got.RateBytes, got.DryRun, tt.wantID, tt.wantAddr, tt.wantRate, tt.wantDry)
			}
		})
	}
}

func TestDrainAlias(t *testing.T) {
	ios, _, _, _ := cli.Test()
	f := cli.NewFactory(ios)
	var got *ChangeOptions
	root := &cobra.Command{Use: "kvctl", SilenceUsage: true, SilenceErrors: true}
	ring := &cobra.Command{Use: "ring"}
	ring.AddCommand(NewCmdRemove(f, func(o *ChangeOptions) error { got = o; return nil }))
	root.AddCommand(ring)
	root.SetArgs([]string{"ring", "drain", "n3", "--yes"})
	if err := root.Execute(); err != nil {
		t.Fatalf("ring drain: %v", err)
	}
	if got.NodeID != "n3" || got.Kind != kvpb.ChangeRequest_REMOVE {
		t.Errorf("got %s %q, want remove n3", got.Kind, got.NodeID)
	}
}

func TestRateFlags(t *testing.T) {
	ios, _, _, _ := cli.Test()
	var got *RateOptions
	cmd := NewCmdRate(cli.NewFactory(ios), func(o *RateOptions) error { got = o; return nil })
	if err := cli.ExecuteTest(cmd, ios, "20"); err != nil {
		t.Fatalf("rate 20: %v", err)
	}
	if got.RateBytes != 20*present.MiB {
		t.Errorf("got %d bytes/s, want %d", got.RateBytes, 20*present.MiB)
	}
	for _, args := range [][]string{{"slow"}, {"0"}, {"--", "-5"}, {"--unlimited", "5"}, {}, {"1", "2"}} {
		cmd = NewCmdRate(cli.NewFactory(ios), func(*RateOptions) error { return nil })
		err := cli.ExecuteTest(cmd, ios, args...)
		if code := cli.ExitCode(err); code != cli.ExitUsage {
			t.Errorf("rate %q: got exit %d (%v), want %d", args, code, err, cli.ExitUsage)
		}
		if msg := fmt.Sprint(err); strings.Contains(msg, "\n") {
			t.Errorf("rate %q: got %q, want one line", args, msg)
		}
	}
	cmd = NewCmdRate(cli.NewFactory(ios), func(*RateOptions) error { return nil })
	if err := cli.ExecuteTest(cmd, ios, "0"); !strings.Contains(fmt.Sprint(err), "kvctl ring pause") || !strings.Contains(fmt.Sprint(err), "--unlimited") {
		t.Errorf("rate 0: got %v, want a hint at kvctl ring pause and --unlimited", err)
	}
	for _, tc := range []struct {
		args      []string
		rate      uint64
		unlimited bool
		node      string
	}{
		{[]string{"--unlimited"}, 0, true, ""},
		{[]string{"2", "--node", "n4"}, 2 * present.MiB, false, "n4"},
		{[]string{"--unlimited", "--node", "n2"}, 0, true, "n2"},
	} {
		got = nil
		cmd = NewCmdRate(cli.NewFactory(ios), func(o *RateOptions) error { got = o; return nil })
		if err := cli.ExecuteTest(cmd, ios, tc.args...); err != nil {
			t.Fatalf("rate %q: %v", tc.args, err)
		}
		if got.RateBytes != tc.rate || got.Unlimited != tc.unlimited || got.NodeID != tc.node {
			t.Errorf("rate %q: got %d, unlimited %v, node %q, want %d, %v, %q", tc.args, got.RateBytes, got.Unlimited, got.NodeID, tc.rate, tc.unlimited, tc.node)
		}
	}
}

func TestParallelFlags(t *testing.T) {
	ios, _, _, _ := cli.Test()
	var got *ParallelOptions
	cmd := NewCmdParallel(cli.NewFactory(ios), func(o *ParallelOptions) error { got = o; return nil })
	if err := cli.ExecuteTest(cmd, ios, "3"); err != nil || got.Parallel != 3 {
		t.Fatalf("parallel 3: got %+v, %v, want 3", got, err)
	}
	for _, args := range [][]string{{"0"}, {"--", "-1"}, {"two"}, {"1.5"}} {
		cmd = NewCmdParallel(cli.NewFactory(ios), func(*ParallelOptions) error { return nil })
		if code := cli.ExitCode(cli.ExecuteTest(cmd, ios, args...)); code != cli.ExitUsage {
			t.Errorf("parallel %q: got exit %d, want %d", args, code, cli.ExitUsage)
		}
	}
}

// fakeAdmin answers the ring-change RPCs from canned values and records what it was asked.
type fakeAdmin struct {
	kvpb.AdminClient
	plan    *kvpb.ChangePlan
	planErr error
	infoErr error
	info    *kvpb.NodeInfoResponse
	watch   []*kvpb.ChangeProgress
	status  *kvpb.ChangeProgress
	ring    *kvpb.RingResponse
	started []*kvpb.ChangeRequest
	rateSet []uint64
	rateErr error
	// pauseErr answers PauseChange and ResumeChange when set.
	pauseErr    error
	parallelSet []uint32
	abortedOK   bool
	// history answers ChangeHistory, newest first; empty: no history.
	history []*kvpb.ChangeRecord
}

func (f *fakeAdmin) PlanChange(_ context.Context, req *kvpb.ChangeRequest, _ ...grpc.CallOption) (*kvpb.ChangePlan, error) {
	if f.planErr != nil {
		return nil, f.planErr
	}
	p := proto.Clone(f.plan).(*kvpb.ChangePlan)
	if p.Request == nil { // a canned rebalance plan brings its own request (the vnodes chosen)
		p.Request = req
	}
	return p, nil
}

func (f *fakeAdmin) StartChange(_ context.Context, req *kvpb.ChangeRequest, _ ...grpc.CallOption) (*kvpb.ChangePlan, error) {
	f.started = append(f.started, req)
	p := proto.Clone(f.plan).(*kvpb.ChangePlan)
	p.Id, p.Request = 7, req
	return p, nil
}

func (f *fakeAdmin) NodeInfo(context.Context, *kvpb.NodeInfoRequest, ...grpc.CallOption) (*kvpb.NodeInfoResponse, error) {
	return f.info, f.infoErr
}

func (f *fakeAdmin) ChangeStatus(context.Context, *kvpb.ChangeStatusRequest, ...grpc.CallOption) (*kvpb.ChangeProgress, error) {
	return f.status, nil
}

func (f *fakeAdmin) Ring(context.Context, *kvpb.RingRequest, ...grpc.CallOption) (*kvpb.RingResponse, error) {
	return f.ring, nil
}

func (f *fakeAdmin) SetChangeRate(_ context.Context, req *kvpb.SetChangeRateRequest, _ ...grpc.CallOption) (*kvpb.ChangeProgress, error) {
	if f.rateErr != nil {
		return nil, f.rateErr
	}
	f.rateSet = append(f.rateSet, req.GetRateBytes())
	return &kvpb.ChangeProgress{Id: 7, State: kvpb.ChangeState_CHANGE_STATE_STREAMING, RateLimitBytes: req.GetRateBytes()}, nil
}

func (f *fakeAdmin) PauseChange(_ context.Context, req *kvpb.PauseChangeRequest, _ ...grpc.CallOption) (*kvpb.ChangeProgress, error) {
	if f.pauseErr != nil {
		return nil, f.pauseErr
	}
	p := proto.Clone(f.status).(*kvpb.ChangeProgress)
	p.State, p.PendingReplicas = kvpb.ChangeState_CHANGE_STATE_PAUSED, 1
	p.Pauses = append(p.Pauses, &kvpb.ChangePause{By: req.GetBy(), Reason: req.GetReason(), PausedUnix: time.Now().Unix()})
	return p, nil
}

func (f *fakeAdmin) ResumeChange(_ context.Context, req *kvpb.ResumeChangeRequest, _ ...grpc.CallOption) (*kvpb.ChangeProgress, error) {
	if f.pauseErr != nil {
		return nil, f.pauseErr
	}
	return f.status, nil
}

func (f *fakeAdmin) SetChangeParallel(_ context.Context, req *kvpb.SetChangeParallelRequest, _ ...grpc.CallOption) (*kvpb.ChangeProgress, error) {
	f.parallelSet = append(f.parallelSet, req.GetParallel())
	return f.status, nil
}

func (f *fakeAdmin) AbortChange(context.Context, *kvpb.AbortChangeRequest, ...grpc.CallOption) (*kvpb.ChangeProgress, error) {
	f.abortedOK = true
	return &kvpb.ChangeProgress{Id: f.status.GetId(), State: kvpb.ChangeState_CHANGE_STATE_ABORTED, Plan: f.status.GetPlan()}, nil
}

func (f *fakeAdmin) WatchChange(context.Context, *kvpb.ChangeStatusRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[kvpb.ChangeProgress], error) {
	return &fakeStream{msgs: f.watch}, nil
}

type fakeStream struct {
	grpc.ClientStream
	msgs []*kvpb.ChangeProgress
}

func (s *fakeStream) Recv() (*kvpb.ChangeProgress, error) {
	if len(s.msgs) == 0 {
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

// addPlan is a plan of adding n4 to n1..n3 with moves moves, each est 100 keys / 10 KiB.
func addPlan(moves int) *kvpb.ChangePlan {
	p := &kvpb.ChangePlan{FromEpoch: 3, ToEpoch: 4, EstKeys: uint64(100 * moves), EstBytes: uint64(10 << 10 * moves)}
	step := uint64(1) << 56
	for i := range moves {
		p.Moves = append(p.Moves, &kvpb.RangeMove{Start: uint64(i) * step, End: uint64(i)*step + step/4,
			Source: fmt.Sprintf("n%d", i%3+1), Target: "n4", EstKeys: 100, EstBytes: 10 << 10})
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		p.Before = append(p.Before, &kvpb.NodeOwnership{Id: id, State: kvpb.NodeState_NODE_STATE_UP, Vnodes: 32, Share: 1.0 / 3, ReplicaShare: 1})
		p.After = append(p.After, &kvpb.NodeOwnership{Id: id, State: kvpb.NodeState_NODE_STATE_UP, Vnodes: 32, Share: 0.25, ReplicaShare: 0.75})
	}
	p.After = append(p.After, &kvpb.NodeOwnership{Id: "n4", State: kvpb.NodeState_NODE_STATE_JOINING, Vnodes: 32, Share: 0.25, ReplicaShare: 0.75})
	return p
}

func progressOf(p *kvpb.ChangePlan, state kvpb.ChangeState, frac float64) *kvpb.ChangeProgress {
	cp := &kvpb.ChangeProgress{Id: 7, State: state, Plan: p, KeysTotal: p.GetEstKeys(), BytesTotal: p.GetEstBytes(), RateLimitBytes: 10 * present.MiB}
	for _, m := range p.GetMoves() {
		rs := &kvpb.RangeProgress{Move: m, State: kvpb.MoveState_MOVE_STATE_STREAMING, KeysDone: uint64(frac * float64(m.GetEstKeys())), BytesDone: uint64(frac * float64(m.GetEstBytes()))}
		if frac >= 1 {
			rs.State = kvpb.MoveState_MOVE_STATE_DONE
		}
		cp.Ranges = append(cp.Ranges, rs)
		cp.KeysDone += rs.KeysDone
		cp.BytesDone += rs.BytesDone
	}
	return cp
}

func fakeDeps(ios *cli.IOStreams, fa *fakeAdmin, jsonOut bool) Deps {
	return cli.TestAdminDeps(ios, func(string) (kvpb.AdminClient, error) { return fa, nil }, jsonOut)
}

func TestAddFollowsTheChange(t *testing.T) {
	plan := addPlan(20)
	fa := &fakeAdmin{plan: plan, info: &kvpb.NodeInfoResponse{Id: "n4"},
		watch: []*kvpb.ChangeProgress{progressOf(plan, kvpb.ChangeState_CHANGE_STATE_STREAMING, 0.25), progressOf(plan, kvpb.ChangeState_CHANGE_STATE_STREAMING, 0.5), progressOf(plan, kvpb.ChangeState_CHANGE_STATE_DONE, 1)}}
	ios, _, out, errOut := cli.Test()
	o := &ChangeOptions{Deps: fakeDeps(ios, fa, false), Kind: kvpb.ChangeRequest_ADD, NodeID: "n4", NodeAddr: "127.0.0.1:9094",
		Yes: true, RateBytes: 10 * present.MiB, Interval: time.Second, Reconnect: time.Second}
	if err := runChange(context.Background(), o); err != nil {
		t.Fatalf("add: %v\nstderr:\n%s", err, errOut)
	}
	if len(fa.started) != 1 || fa.started[0].GetRateBytes() != 10*present.MiB || fa.started[0].GetNodeId() != "n4" {
		t.Fatalf("got StartChange calls %v, want one for n4 at 10 present.MiB/s", fa.started)
	}
	for _, want := range []string{
		"plan: add n4 (127.0.0.1:9094), ring epoch 3 -> 4",
		"moves: 20 ranges",
		"n1\tn4\t7\t", // summarised per source and target: 7 of the 20 moves come from n1
		"n4\t- -> JOINING\t0 -> 32\t- -> 25.0%\t- -> 75.0%",
		"n1\tUP\t32\t33.3% -> 25.0%\t100.0% -> 75.0%",
		"change 7 done: add n4 (127.0.0.1:9094); moved 200.0 KiB, 2000 keys; ring epoch 4",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// Piped: one line per update at most once a second, plus the final one.
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if len(lines) < 3 || !strings.Contains(errOut.String(), "change 7 started") || !strings.Contains(lines[len(lines)-1], "done 100%") || !strings.Contains(lines[len(lines)-1], "ranges 20/20") {
		t.Errorf("got progress on stderr:\n%s\nwant a start line and a final line with ranges 20/20", errOut)
	}
	if strings.Contains(errOut.String(), "\x1b[") {
		t.Errorf("got terminal escapes on a piped stderr:\n%q", errOut)
	}
}

func TestAddRefusals(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "connection refused")
	tests := []struct {
		name      string
		plan      *kvpb.ChangePlan
		planErr   error
		infoErr   error
		force     bool
		dryRun    bool
		wantCode  int
		wantStart bool
		wantText  string
	}{
		{name: "change in flight", plan: &kvpb.ChangePlan{Refusals: []string{"change 3 (add n5) is in flight"}}, wantCode: cli.ExitRefused, wantText: "change 3"},
		{name: "address does not answer", plan: &kvpb.ChangePlan{Refusals: []string{"n4 at 127.0.0.1:1 does not answer: unavailable"}}, wantCode: cli.ExitRefused, wantText: "does not answer"},
		{name: "forced past a refusal", plan: &kvpb.ChangePlan{Refusals: []string{"n4 at 127.0.0.1:1 does not answer: unavailable"}}, force: true, wantStart: true},
		// The dry run agrees with the real run: forced, it is not refused either.
		{name: "forced dry run", plan: &kvpb.ChangePlan{Refusals: []string{"n4 already has a ring (epoch 5): not an empty node"}}, force: true, dryRun: true,
			wantText: "--force overrides the refusals above"},
		{name: "dry run", plan: &kvpb.ChangePlan{Refusals: []string{"n4 already has a ring (epoch 5): not an empty node"}}, dryRun: true,
			wantCode: cli.ExitRefused, wantText: "--force to override"},
		{name: "member exists", planErr: status.Error(codes.AlreadyExists, "member already in the ring"), wantCode: cli.ExitRefused, wantText: "already"},
		{name: "cluster down", planErr: unavailable, wantCode: cli.ExitFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := tt.plan
			if plan == nil {
				plan = addPlan(1)
			}
			fa := &fakeAdmin{plan: plan, planErr: tt.planErr, infoErr: tt.infoErr, info: &kvpb.NodeInfoResponse{Id: "n4"},
				watch: []*kvpb.ChangeProgress{progressOf(plan, kvpb.ChangeState_CHANGE_STATE_DONE, 1)}}
			ios, _, out, _ := cli.Test()
			o := &ChangeOptions{Deps: fakeDeps(ios, fa, false), Kind: kvpb.ChangeRequest_ADD, NodeID: "n4", NodeAddr: "127.0.0.1:1",
				Yes: true, Force: tt.force, DryRun: tt.dryRun, Interval: time.Second, Reconnect: time.Second}
			err := runChange(context.Background(), o)
			if code := cli.ExitCode(err); code != tt.wantCode {
				t.Fatalf("got exit %d (%v), want %d", code, err, tt.wantCode)
			}
			if started := len(fa.started) > 0; started != tt.wantStart {
				t.Errorf("got started=%v, want %v", started, tt.wantStart)
			}
			if said := fmt.Sprint(err) + out.String(); tt.wantText != "" && !strings.Contains(said, tt.wantText) {
				t.Errorf("got error %v and output %q, want them to mention %q", err, out, tt.wantText)
			}
			if tt.wantCode == cli.ExitRefused && tt.planErr == nil && !strings.Contains(out.String(), "refused: ") {
				t.Errorf("got plan without its refusal:\n%s", out)
			}
		})
	}
}

func TestConfirm(t *testing.T) {
	for _, answer := range []string{"y\n", "n\n", ""} {
		plan := addPlan(1)
		fa := &fakeAdmin{plan: plan, info: &kvpb.NodeInfoResponse{Id: "n4"}, watch: []*kvpb.ChangeProgress{progressOf(plan, kvpb.ChangeState_CHANGE_STATE_DONE, 1)}}
		ios, in, _, errOut := cli.Test()
		in.WriteString(answer)
		o := &ChangeOptions{Deps: fakeDeps(ios, fa, false), Kind: kvpb.ChangeRequest_ADD, NodeID: "n4", NodeAddr: "h:1", Interval: time.Second, Reconnect: time.Second}
		err := runChange(context.Background(), o)
		if want := answer == "y\n"; (len(fa.started) == 1) != want || (err == nil) != want {
			t.Errorf("answer %q: got started=%d err=%v, want started=%v", answer, len(fa.started), err, want)
		}
		if !strings.Contains(errOut.String(), "Go ahead? [y/N]") {
			t.Errorf("answer %q: got no prompt on stderr:\n%s", answer, errOut)
		}
	}
}

func TestDryRunJSON(t *testing.T) {
	fa := &fakeAdmin{plan: addPlan(3), info: &kvpb.NodeInfoResponse{Id: "n4"}}
	ios, _, out, _ := cli.Test()
	o := &ChangeOptions{Deps: fakeDeps(ios, fa, true), Kind: kvpb.ChangeRequest_ADD, NodeID: "n4", NodeAddr: "h:1", DryRun: true, Interval: time.Second}
	if err := runChange(context.Background(), o); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if len(fa.started) != 0 {
		t.Fatalf("got %d StartChange calls on a dry run, want 0", len(fa.started))
	}
	var got struct {
		Moves []struct{ Source, Target string } `json:"moves"`
		After []struct{ ID string }             `json:"after"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if len(got.Moves) != 3 || got.Moves[0].Target != "n4" || len(got.After) != 4 {
		t.Errorf("got %d moves (first to %q), %d nodes after, want 3 to n4 and 4", len(got.Moves), got.Moves[0].Target, len(got.After))
	}
}

func TestStatusAbortRate(t *testing.T) {
	plan := addPlan(4)
	plan.Request = &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4", GrpcAddr: "h:1"}
	fa := &fakeAdmin{status: progressOf(plan, kvpb.ChangeState_CHANGE_STATE_STREAMING, 0.5)}
	ios, _, out, _ := cli.Test()
	if err := runStatus(context.Background(), &StatusOptions{Deps: fakeDeps(ios, fa, false), Once: true, Ranges: true}); err != nil {
		t.Fatalf("status: %v", err)
	}
	for _, want := range []string{"change 7: add n4 (h:1), epoch 3 -> 4", "n4\t0/4\t20.0 KiB of 40.0 KiB (50%)\t200 of 400 (50%)", "streaming\t5.0 KiB of 10.0 KiB (50%)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out.Reset()
	if err := runRate(context.Background(), &RateOptions{Deps: fakeDeps(ios, fa, false), RateBytes: 3 * present.MiB}); err != nil {
		t.Fatalf("rate: %v", err)
	}
	if len(fa.rateSet) != 1 || fa.rateSet[0] != 3*present.MiB || !strings.Contains(out.String(), "3.0 MB/s") ||
		!strings.Contains(out.String(), "for this change only (the next starts at its --rate)") {
		t.Errorf("got rates %v and %q, want one of 3 present.MiB/s", fa.rateSet, out)
	}
	out.Reset()
	if err := runAbort(context.Background(), &AbortOptions{Deps: fakeDeps(ios, fa, false)}); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if !fa.abortedOK || !strings.Contains(out.String(), "change 7 (add n4 (h:1)) aborted; the ring stays at epoch 3") ||
		!strings.Contains(out.String(), "to add it again: kvctl ring add n4=h:1 --force") {
		t.Errorf("got abort output %q", out)
	}
	fa.status = &kvpb.ChangeProgress{State: kvpb.ChangeState_CHANGE_STATE_NONE}
	if err := runAbort(context.Background(), &AbortOptions{Deps: fakeDeps(ios, fa, false)}); err == nil {
		t.Errorf("abort with no change: got no error, want one")
	}
}

func TestRendererOnTerminal(t *testing.T) {
	plan := addPlan(2)
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	r := &Renderer{W: &buf, TTY: true, Every: time.Second, Now: func() time.Time { return now }}
	r.Update(progressOf(plan, kvpb.ChangeState_CHANGE_STATE_STREAMING, 0.25), false)
	now = now.Add(time.Second)
	r.Update(progressOf(plan, kvpb.ChangeState_CHANGE_STATE_STREAMING, 0.75), false)
	s := buf.String()
	if !strings.Contains(s, "\x1b[2A") {
		t.Errorf("got no cursor-up before the redraw:\n%q", s)
	}
	// n4 went from 5 KiB to 15 KiB in one second.
	if !strings.Contains(s, "-> n4") || !strings.Contains(s, "0.0 MB/s") && !strings.Contains(s, "ETA") {
		t.Errorf("got %q, want a line for n4 with a rate and an ETA", s)
	}
}

func TestPrintRing(t *testing.T) {
	ios, _, out, _ := cli.Test()
	resp := &kvpb.RingResponse{
		Ring: &kvpb.RingState{Epoch: 4, Replicas: 3, Members: make([]*kvpb.Member, 2)},
		Ownership: []*kvpb.NodeOwnership{
			{Id: "n1", State: kvpb.NodeState_NODE_STATE_UP, Vnodes: 32, Share: 0.5, ReplicaShare: 1, Keys: 100, Bytes: 2048},
			{Id: "n2", State: kvpb.NodeState_NODE_STATE_LEAVING, Vnodes: 32, Share: 0.5, ReplicaShare: 1, Error: "unavailable: down"},
		},
	}
	if err := PrintRing(ios, resp, true); err != nil {
		t.Fatalf("print: %v", err)
	}
	for _, want := range []string{"ring epoch 4, replicas 3, 2 members", "n1\tUP\t32\t50.0%\t100.0%\t100\t2.0 KiB\t", "n2\tLEAVING\t32\t50.0%\t100.0%\t-\t-\tunavailable: down", "no change in flight"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ring show lacks %q:\n%s", want, out)
		}
	}
}

func TestRebalance(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		wantCode int
		wantMax  int
	}{
		{[]string{"--yes"}, 0, 0},
		{[]string{"--yes", "--max-moves", "3"}, 0, 3},
		{[]string{"--yes", "--max-moves", "-1"}, cli.ExitUsage, 0},
		{[]string{"n2", "--yes"}, cli.ExitUsage, 0},
		{[]string{}, cli.ExitUsage, 0}, // piped without --yes
	} {
		ios, _, _, _ := cli.Test()
		var got *ChangeOptions
		cmd := NewCmdRebalance(cli.NewFactory(ios), func(o *ChangeOptions) error { got = o; return nil })
		err := cli.ExecuteTest(cmd, ios, tt.args...)
		if code := cli.ExitCode(err); code != tt.wantCode && !(tt.wantCode == cli.ExitUsage && err != nil) {
			t.Errorf("rebalance %v: exit %d (%v), want %d", tt.args, code, err, tt.wantCode)
			continue
		}
		if tt.wantCode == 0 && (got.Kind != kvpb.ChangeRequest_REBALANCE || got.MaxMoves != tt.wantMax) {
			t.Errorf("rebalance %v: kind %v, max moves %d; want REBALANCE, %d", tt.args, got.Kind, got.MaxMoves, tt.wantMax)
		}
	}

	// The vnodes the plan chose are the ones started, and the plan shows load before and after.
	plan := addPlan(3)
	plan.After = plan.After[:3]
	plan.Request = &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REBALANCE, TokenMoves: []*kvpb.TokenMove{
		{Token: 0xabc, From: "n2", To: "n1", Load: 120}, {Token: 0xdef, From: "n2", To: "n3", Load: 80},
	}}
	for i, l := range []float64{100, 400, 100} {
		plan.Before[i].Load = l
		plan.After[i].Load = []float64{220, 200, 180}[i]
	}
	fa := &fakeAdmin{plan: plan, watch: []*kvpb.ChangeProgress{progressOf(plan, kvpb.ChangeState_CHANGE_STATE_DONE, 1)}}
	ios, _, out, errOut := cli.Test()
	o := &ChangeOptions{Deps: fakeDeps(ios, fa, false), Kind: kvpb.ChangeRequest_REBALANCE, MaxMoves: 2,
		Yes: true, Interval: time.Second, Reconnect: time.Second}
	if err := runChange(context.Background(), o); err != nil {
		t.Fatalf("rebalance: %v\nstderr:\n%s", err, errOut)
	}
	if len(fa.started) != 1 || len(fa.started[0].GetTokenMoves()) != 2 || fa.started[0].GetTokenMoves()[1].GetToken() != 0xdef {
		t.Fatalf("StartChange calls %v, want one with the plan's two vnode moves", fa.started)
	}
	for _, want := range []string{
		"plan: rebalance (2 vnodes), ring epoch 3 -> 4",
		"vnodes: 2 change owner",
		"0000000000000abc\tn2\tn1\t120 op/s",
		"n2\tUP\t32\t33.3% -> 25.0%\t100.0% -> 75.0%\t0\t400 op/s -> 200 op/s",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}

	// Nothing worth moving: the plan says why, nothing starts, exit 0.
	fa = &fakeAdmin{plan: &kvpb.ChangePlan{FromEpoch: 3, ToEpoch: 3, Request: &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REBALANCE},
		Warnings: []string{"no load measured over the last minute: nothing to rebalance"}}}
	ios, _, out, _ = cli.Test()
	o = &ChangeOptions{Deps: fakeDeps(ios, fa, false), Kind: kvpb.ChangeRequest_REBALANCE, Yes: true, Interval: time.Second, Reconnect: time.Second}
	if err := runChange(context.Background(), o); err != nil {
		t.Fatalf("balanced rebalance: %v", err)
	}
	if len(fa.started) != 0 || !strings.Contains(out.String(), "nothing to rebalance") {
		t.Errorf("balanced: %d StartChange calls, stdout:\n%s\nwant none and \"nothing to rebalance\"", len(fa.started), out)
	}
}

// TestRendererFitsAndAgrees: on a 60-column terminal no line of the progress is wider than
// 59 columns (a wider one wraps and leaves a trail on each redraw), and the header's rate and
// ETA are the per-node line's, not the node's own unsmoothed figures (here 25 MB/s, ETA 0).
func TestRendererFitsAndAgrees(t *testing.T) {
	plan := addPlan(200) // 2000 KiB to n4
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	r := &Renderer{W: &buf, TTY: true, Width: func() int { return 60 }, Every: time.Second, Now: func() time.Time { return now }}
	p := progressOf(plan, kvpb.ChangeState_CHANGE_STATE_STREAMING, 0.25)
	r.Update(p, false)
	now = now.Add(time.Second)
	buf.Reset()
	p = progressOf(plan, kvpb.ChangeState_CHANGE_STATE_STREAMING, 0.5)
	p.RateBytesPerSec, p.EtaSeconds = 25*present.MiB, 0
	r.Update(p, false)
	var lines []string
	for _, l := range strings.Split(buf.String(), "\r\x1b[2K") {
		l = strings.TrimSuffix(strings.TrimPrefix(l, "\x1b[2A"), "\n")
		if l == "" {
			continue
		}
		lines = append(lines, l)
		if w := utf8.RuneCountInString(l); w > 59 {
			t.Errorf("got a line of %d columns on a 60-column terminal: %q", w, l)
		}
	}
	wide := &Renderer{W: &buf, TTY: true, Width: func() int { return 400 }, Every: time.Second, Now: func() time.Time { return now }}
	wide.last = r.last
	buf.Reset()
	wide.Update(p, false)
	out := buf.String()
	if strings.Contains(out, "25.0 MB/s") {
		t.Errorf("got the node's own rate in:\n%s\nwant the smoothed one", out)
	}
	for _, want := range []string{"0.5 MB/s, ETA 2s", "0.5 MB/s  ETA 2s"} {
		if !strings.Contains(out, want) {
			t.Errorf("got:\n%s\nwant %q (header and n4 agree)", out, want)
		}
	}
	if len(lines) != 2 {
		t.Errorf("got %d lines, want a header and n4's", len(lines))
	}
}
