package ring

import (
	"context"
	"strings"
	"testing"

	"ringkv/ctl/cli"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

func TestPauseResume(t *testing.T) {
	plan := addPlan(4)
	plan.Request = &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4", GrpcAddr: "h:1"}
	fa := &fakeAdmin{status: progressOf(plan, kvpb.ChangeState_CHANGE_STATE_STREAMING, 0.5)}
	ios, _, out, _ := cli.Test()
	if err := runPause(context.Background(), &PauseOptions{Deps: fakeDeps(ios, fa, false), By: "alice@ops1", Reason: "p99 spike"}); err != nil {
		t.Fatalf("pause: %v", err)
	}
	for _, want := range []string{"change 7 (add n4 (h:1)) PAUSED by alice@ops1 at ", ": p99 spike\n",
		"while paused, writes wait for ack + 1 pending replica; kvctl ring resume goes on, kvctl ring abort gives up"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("pause output lacks %q:\n%s", want, out)
		}
	}
	out.Reset()
	if err := runPause(context.Background(), &PauseOptions{Deps: fakeDeps(ios, fa, false), By: "bob", Resume: true}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if want := "change 7 (add n4 (h:1)) resumed: streaming"; !strings.Contains(out.String(), want) {
		t.Errorf("resume output lacks %q:\n%s", want, out)
	}
	out.Reset()
	if err := runParallel(context.Background(), &ParallelOptions{Deps: fakeDeps(ios, fa, false), Parallel: 2}); err != nil {
		t.Fatalf("parallel: %v", err)
	}
	if len(fa.parallelSet) != 1 || fa.parallelSet[0] != 2 || !strings.Contains(out.String(), "change 7: 2 pulls at once per receiving node, for this change only") {
		t.Errorf("got parallel calls %v and %q, want one of 2", fa.parallelSet, out)
	}
}

// TestPauseRefusals: the node's refusals exit 3 with its one line.
func TestPauseRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resume bool
		reason kvpb.Reason
		text   string
	}{
		{"pause with nothing in flight", false, kvpb.Reason_REASON_NOTHING_TO_PAUSE, "nothing to pause: no ring change is streaming"},
		{"pause twice", false, kvpb.Reason_REASON_ALREADY_PAUSED, "change 7 paused by alice at 2026-11-25T16:05:03Z: the ring change is paused already"},
		{"resume unpaused", true, kvpb.Reason_REASON_NOT_PAUSED, "no ring change is paused"},
	} {
		fa := &fakeAdmin{pauseErr: rpcerr.Encode(rpcerr.New(tc.reason, tc.text))}
		ios, _, _, _ := cli.Test()
		err := runPause(context.Background(), &PauseOptions{Deps: fakeDeps(ios, fa, false), Resume: tc.resume})
		if code := cli.ExitCode(err); code != cli.ExitRefused {
			t.Errorf("%s: got exit %d (%v), want %d", tc.name, code, err, cli.ExitRefused)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "refused: node ") || !strings.HasSuffix(msg, tc.text) || strings.Contains(msg, "\n") {
			t.Errorf("%s: got %q, want one line ending %q", tc.name, msg, tc.text)
		}
	}
}

// TestRateUnknownNode: a --node the cluster does not know exits 4 (not found), as every
// command that names a member, with the node's one line.
func TestRateUnknownNode(t *testing.T) {
	fa := &fakeAdmin{rateErr: rpcerr.Encode(rpcerr.New(kvpb.Reason_REASON_UNKNOWN_MEMBER, "rate of n9: unknown member"))}
	ios, _, out, _ := cli.Test()
	err := runRate(context.Background(), &RateOptions{Deps: fakeDeps(ios, fa, false), RateBytes: 1 << 20, NodeID: "n9"})
	if code := cli.ExitCode(err); code != cli.ExitNotFound {
		t.Errorf("got exit %d (%v), want %d", code, err, cli.ExitNotFound)
	}
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "n9") {
		t.Errorf("got %v, want one line naming n9", err)
	}
	if out.Len() != 0 {
		t.Errorf("got stdout %q, want none", out)
	}
}
