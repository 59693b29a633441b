package tui

import (
	"testing"

	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"ringkv/proto/kvpb"
)

// fakeObservedChange is a finished rebalance whose prediction held on three nodes and missed
// on n3 by 30%.
func fakeObservedChange() *kvpb.ChangeRecord {
	return &kvpb.ChangeRecord{
		Id: 7, Kind: kvpb.ChangeRequest_REBALANCE, By: "alice@ops1", Outcome: kvpb.ChangeOutcome_CHANGE_OUTCOME_DONE,
		StartedUnixMs: fixedNow.Add(-3 * 60e9).UnixMilli(), FinishedUnixMs: fixedNow.Add(-170e9).UnixMilli(), EstBytes: 3 << 20, VnodesMoved: 4, RangesMoved: 6,
		Observation: kvpb.Observation_OBSERVATION_OBSERVED, ObserveFromUnixMs: fixedNow.Add(-110e9).UnixMilli(), ObserveToUnixMs: fixedNow.Add(-50e9).UnixMilli(),
		Nodes: []*kvpb.NodeLoadPrediction{
			{Id: "n1", Before: 812, Predicted: 640, Observed: 655, ObservedOk: true, Error: 0.0234, ErrorOk: true},
			{Id: "n2", Before: 410, Predicted: 520, Observed: 506, ObservedOk: true, Error: -0.0269, ErrorOk: true},
			{Id: "n3", Before: 300, Predicted: 362, Observed: 470, ObservedOk: true, Error: 0.298, ErrorOk: true, Off: true},
		},
	}
}

// TestGoldenPrediction: with no change in flight, the changes screen shows the last change's
// load per node, before -> predicted -> observed, and flags the node off by more than 25%.
func TestGoldenPrediction(t *testing.T) {
	for _, sz := range []struct{ w, h int }{{80, 24}, {160, 48}} {
		t.Run("changes-"+itoa(sz.w)+"x"+itoa(sz.h), func(t *testing.T) {
			tm, src := console(t, sz.w, sz.h)
			src.SendChange(&kvpb.ChangeProgress{State: kvpb.ChangeState_CHANGE_STATE_NONE})
			tm.Send(LastChangeMsg{Record: fakeObservedChange()})
			tm.Type("3")
			waitText(t, tm, "OFF BY >25%")
			teatest.RequireEqualOutput(t, finalScreen(t, tm, colorprofile.ANSI256))
		})
	}
}
