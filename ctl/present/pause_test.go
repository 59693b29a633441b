package present

import (
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

func TestPaused(t *testing.T) {
	now := time.Date(2026, 11, 25, 16, 9, 15, 0, time.UTC)
	at := time.Date(2026, 11, 25, 16, 5, 3, 0, time.UTC).Unix()
	paused := &kvpb.ChangeProgress{State: kvpb.ChangeState_CHANGE_STATE_PAUSED, PendingReplicas: 1,
		Pauses: []*kvpb.ChangePause{{By: "bob", PausedUnix: at - 3600, ResumedUnix: at - 60}, {By: "alice", Reason: "p99 spike", PausedUnix: at}}}
	yesterday := &kvpb.ChangeProgress{State: kvpb.ChangeState_CHANGE_STATE_PAUSED, PendingReplicas: 2,
		Pauses: []*kvpb.ChangePause{{By: "kvctl@ops1", PausedUnix: at - 86400}}}
	resumed := &kvpb.ChangeProgress{State: kvpb.ChangeState_CHANGE_STATE_STREAMING,
		Pauses: []*kvpb.ChangePause{{By: "bob", PausedUnix: at - 3600, ResumedUnix: at - 60}}}
	for _, tc := range []struct {
		name       string
		p          *kvpb.ChangeProgress
		want, cost string
	}{
		{"paused", paused, "PAUSED by alice at 16:05:03 UTC (for 4m12s): p99 spike", "writes wait for ack + 1 pending replica"},
		{"paused yesterday", yesterday, "PAUSED by kvctl@ops1 at Nov 24 16:05:03 UTC (for 24h4m12s)", "writes wait for ack + 2 pending replicas"},
		{"resumed", resumed, "", ""},
	} {
		if got := Paused(tc.p, now); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
		if got := PendingCost(tc.p); got != tc.cost {
			t.Errorf("%s: cost: got %q, want %q", tc.name, got, tc.cost)
		}
	}
}
