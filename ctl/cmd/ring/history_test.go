package ring

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"ringkv/ctl/cli"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

func (f *fakeAdmin) ChangeHistory(_ context.Context, req *kvpb.ChangeHistoryRequest, _ ...grpc.CallOption) (*kvpb.ChangeHistoryResponse, error) {
	if len(f.history) == 0 {
		return nil, rpcerr.Encode(rpcerr.New(kvpb.Reason_REASON_NO_HISTORY, "no ring change has finished yet"))
	}
	if id := req.GetId(); id != 0 {
		for _, r := range f.history {
			if r.GetId() == id {
				return &kvpb.ChangeHistoryResponse{Changes: []*kvpb.ChangeRecord{r}}, nil
			}
		}
		return nil, rpcerr.Encode(rpcerr.New(kvpb.Reason_REASON_UNKNOWN_CHANGE, "no such ring change in the history"))
	}
	n := min(int(req.GetLimit()), len(f.history))
	return &kvpb.ChangeHistoryResponse{Changes: f.history[:n]}, nil
}

// observedRebalance is a rebalance whose prediction held on n1 and n2 and missed on n3.
func observedRebalance() *kvpb.ChangeRecord {
	return &kvpb.ChangeRecord{
		Id: 7, Kind: kvpb.ChangeRequest_REBALANCE, By: "alice@ops1", Outcome: kvpb.ChangeOutcome_CHANGE_OUTCOME_DONE,
		StartedUnixMs: 1_764_097_200_000, FinishedUnixMs: 1_764_097_212_000, EstBytes: 3 << 20, VnodesMoved: 4, RangesMoved: 6,
		Observation: kvpb.Observation_OBSERVATION_OBSERVED, ObserveFromUnixMs: 1_764_097_272_000, ObserveToUnixMs: 1_764_097_332_000,
		Nodes: []*kvpb.NodeLoadPrediction{
			{Id: "n1", Before: 812, Predicted: 640, Observed: 655, ObservedOk: true, Error: 0.0234, ErrorOk: true},
			{Id: "n2", Before: 410, Predicted: 520, Observed: 506, ObservedOk: true, Error: -0.0269, ErrorOk: true},
			{Id: "n3", Before: 300, Predicted: 362, Observed: 470, ObservedOk: true, Error: 0.298, ErrorOk: true, Off: true},
			{Id: "n4", Before: 300, Predicted: 300, Note: "did not answer at the window's end: connection refused"},
		},
	}
}

func TestHistory(t *testing.T) {
	observing := &kvpb.ChangeRecord{Id: 8, Kind: kvpb.ChangeRequest_ADD, NodeId: "n5", Outcome: kvpb.ChangeOutcome_CHANGE_OUTCOME_DONE,
		StartedUnixMs: 1_764_097_800_000, FinishedUnixMs: 1_764_097_940_000,
		Observation: kvpb.Observation_OBSERVATION_OBSERVING, ObserveToUnixMs: 1_764_098_000_000,
		Nodes: []*kvpb.NodeLoadPrediction{{Id: "n5", Predicted: 200}}}
	fa := &fakeAdmin{history: []*kvpb.ChangeRecord{observing, observedRebalance()}}
	ios, _, out, _ := cli.Test()
	if err := runHistory(context.Background(), &HistoryOptions{Deps: fakeDeps(ios, fa, false), Limit: 2}); err != nil {
		t.Fatalf("history: %v", err)
	}
	for _, want := range []string{
		"change 8 add n5: done 19:12:20 UTC, took 2m20s, 0 B planned\n",
		"observing: result at 19:13:20 UTC",
		"change 7 rebalance (4 vnodes) by alice@ops1: done 19:00:12 UTC, took 12s, 3.0 MiB planned",
		"observed 19:01:12-19:02:12 UTC",
		"  NODE BEFORE    PREDICTED    OBSERVED  ERROR\n",
		"  n1    812/s ->     640/s ->    655/s  +2.3%\n",
		"  n3    300/s ->     362/s ->    470/s +29.8% OFF BY >25%\n",
		"  n4    300/s ->     300/s ->        -      - did not answer at the window's end",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out.String(), "OFF BY") != 1 {
		t.Errorf("want one node flagged:\n%s", out)
	}

	// JSON: the response with proto field names.
	ios, _, out, _ = cli.Test()
	if err := runHistory(context.Background(), &HistoryOptions{Deps: fakeDeps(ios, fa, true), Limit: 1, ID: 7}); err != nil {
		t.Fatalf("history json: %v", err)
	}
	for _, want := range []string{`"changes": [`, `"observation": "OBSERVATION_OBSERVED"`, `"off": true`, `"predicted": 362`, `"error_ok": true`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("json lacks %s:\n%s", want, out)
		}
	}
}

// Each bad request is one line and its exit code: usage for -n 0 or a bad id, not found for
// an unknown change or no history.
func TestHistoryErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		history []*kvpb.ChangeRecord
		code    int
		line    string
	}{
		{"n zero", []string{"-n", "0"}, nil, cli.ExitUsage, "-n 0: want at least 1 change"},
		{"n negative", []string{"-n", "-3"}, nil, cli.ExitUsage, "-n -3: want at least 1 change"},
		{"bad id", []string{"seven"}, nil, cli.ExitUsage, `change id "seven": want a positive number`},
		{"no history", nil, nil, cli.ExitNotFound, "no ring change has finished yet"},
		{"unknown change", []string{"9"}, []*kvpb.ChangeRecord{observedRebalance()}, cli.ExitNotFound, "no such ring change in the history"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fa := &fakeAdmin{history: tc.history}
			ios, _, _, _ := cli.Test()
			f := cli.NewFactory(ios)
			cmd := NewCmdHistory(f, func(o *HistoryOptions) error {
				o.Deps = fakeDeps(ios, fa, false)
				return runHistory(context.Background(), o)
			})
			err := cli.ExecuteTest(cmd, ios, tc.args...)
			if code := cli.ExitCode(err); code != tc.code || err == nil || !strings.Contains(err.Error(), tc.line) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got exit %d, %v; want exit %d and one line with %q", code, err, tc.code, tc.line)
			}
		})
	}
}
