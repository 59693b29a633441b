package present

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
)

func TestChange(t *testing.T) {
	tests := []struct {
		in   *kvpb.ChangeRequest
		want string
	}{
		{&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4", GrpcAddr: "10.0.0.4:9090"}, "add n4 (10.0.0.4:9090)"},
		{&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4"}, "add n4"},
		// The console's drain key and kvctl ring drain/remove start the same REMOVE change.
		{&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REMOVE, NodeId: "n2"}, "remove n2"},
		{&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REBALANCE}, "rebalance"},
		{&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REBALANCE, TokenMoves: make([]*kvpb.TokenMove, 3)}, "rebalance (3 vnodes)"},
		{nil, "change"},
	}
	for _, tt := range tests {
		if got := Change(tt.in); got != tt.want {
			t.Errorf("Change(%v): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestInFlight(t *testing.T) {
	for state, want := range map[kvpb.ChangeState]bool{
		kvpb.ChangeState_CHANGE_STATE_NONE:         false,
		kvpb.ChangeState_CHANGE_STATE_STREAMING:    true,
		kvpb.ChangeState_CHANGE_STATE_HANDING_OVER: true,
		kvpb.ChangeState_CHANGE_STATE_DONE:         false,
		kvpb.ChangeState_CHANGE_STATE_ABORTED:      false,
	} {
		if got := InFlight(&kvpb.ChangeProgress{Id: 1, State: state}); got != want {
			t.Errorf("InFlight(%v): got %v, want %v", state, got, want)
		}
		// Every state has its word.
		if w := State(state); w == "" || w == state.String() {
			t.Errorf("State(%v) = %q, want a word of its own", state, w)
		}
	}
	if InFlight(nil) {
		t.Errorf("InFlight(nil): got true, want false")
	}
}

func TestBreakers(t *testing.T) {
	b := func(peer string, state kvpb.BreakerState_State) *kvpb.BreakerState {
		return &kvpb.BreakerState{Peer: peer, State: state}
	}
	tests := []struct {
		in          []*kvpb.BreakerState
		long, short string
	}{
		{nil, "ok", "ok"},
		{[]*kvpb.BreakerState{b("n2", kvpb.BreakerState_CLOSED), b("n3", kvpb.BreakerState_CLOSED)}, "ok", "ok"},
		{[]*kvpb.BreakerState{b("n2", kvpb.BreakerState_OPEN), b("n3", kvpb.BreakerState_CLOSED)}, "open: n2", "open n2"},
		{[]*kvpb.BreakerState{b("n3", kvpb.BreakerState_OPEN), b("n2", kvpb.BreakerState_OPEN)}, "open: n2,n3", "2 open"},
	}
	for _, tt := range tests {
		if got := Breakers(tt.in); got != tt.long {
			t.Errorf("Breakers(%v): got %q, want %q", tt.in, got, tt.long)
		}
		if got := BreakersShort(tt.in); got != tt.short {
			t.Errorf("BreakersShort(%v): got %q, want %q", tt.in, got, tt.short)
		}
	}
}

func TestBytes(t *testing.T) {
	tests := []struct {
		in          uint64
		long, short string
	}{
		{0, "0 B", "0 B"},
		{512, "512 B", "512 B"},
		{1023, "1023 B", "1023 B"},
		{1024, "1.0 KiB", "1.0 KiB"},
		{1536, "1.5 KiB", "1.5 KiB"},
		{614400, "600.0 KiB", "600 KiB"},
		{20 << 20, "20.0 MiB", "20 MiB"},
		{3328599654, "3.1 GiB", "3.1 GiB"},
	}
	for _, tt := range tests {
		if got := Bytes(tt.in); got != tt.long {
			t.Errorf("Bytes(%d): got %q, want %q", tt.in, got, tt.long)
		}
		if got := BytesShort(float64(tt.in)); got != tt.short {
			t.Errorf("BytesShort(%d): got %q, want %q", tt.in, got, tt.short)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		in           error
		oneLine, rpc string
	}{
		{errors.New("first\nsecond"), "first", "first"},
		{status.Error(codes.DeadlineExceeded, "slow"), "rpc error: code = DeadlineExceeded desc = slow", "deadline exceeded: slow"},
		{status.Error(codes.FailedPrecondition, "a change is in flight"), "rpc error: code = FailedPrecondition desc = a change is in flight", "failed precondition: a change is in flight"},
		{status.Error(codes.Unavailable, "no leader"), "rpc error: code = Unavailable desc = no leader", "unavailable: no leader"},
	}
	for _, tt := range tests {
		if got := OneLine(tt.in); got != tt.oneLine {
			t.Errorf("OneLine(%v): got %q, want %q", tt.in, got, tt.oneLine)
		}
		if got := RPC(tt.in); got != tt.rpc {
			t.Errorf("RPC(%v): got %q, want %q", tt.in, got, tt.rpc)
		}
	}
}

func TestTime(t *testing.T) {
	at := time.Date(2026, 11, 23, 21, 0, 0, 250e6, time.UTC)
	ts := uint64(at.UnixMilli())<<16 | 7 // a logical counter of 7 does not move the wall time
	if got, want := Time(ts), "2026-11-23T21:00:00.25Z"; got != want {
		t.Errorf("Time(%d): got %q, want %q", ts, got, want)
	}
}

func TestPace(t *testing.T) {
	for _, tc := range []struct {
		p    *kvpb.Pace
		want string
	}{
		{&kvpb.Pace{NodeId: "n1", Sending: true, RateBytes: 12 << 20, P99Ms: 9.1, TargetMs: 6, Reason: kvpb.PaceReason_PACE_REASON_BACKING_OFF},
			"n1 sending: pace 12.0 MB/s, backing off: p99 9.1 ms > target 6.0 ms"},
		{&kvpb.Pace{NodeId: "n4", RateBytes: 64 << 20, LimitBytes: 64 << 20, P99Ms: 3, TargetMs: 6, Reason: kvpb.PaceReason_PACE_REASON_AT_CEILING},
			"n4 receiving: pace 64.0 MB/s, at ceiling: p99 3.0 ms ≤ target 6.0 ms"},
		{&kvpb.Pace{NodeId: "n4", RateBytes: 12 << 20, Reason: kvpb.PaceReason_PACE_REASON_GROWING},
			"n4 receiving: pace 12.0 MB/s, growing: no p99 seen yet"},
		{&kvpb.Pace{NodeId: "n2", Sending: true, RateBytes: 4 << 20, P99Ms: 3, TargetMs: 6, CpuWaitMs: 0.4, Reason: kvpb.PaceReason_PACE_REASON_SLOW_START},
			"n2 sending: pace 4.0 MB/s, slow start: p99 3.0 ms ≤ target 6.0 ms, CPU wait 0.4 ms"},
		{&kvpb.Pace{NodeId: "n2", Sending: true, RateBytes: 2 << 20, P99Ms: 5.2, TargetMs: 6, CpuWaitMs: 4.1, ByCpu: true, Reason: kvpb.PaceReason_PACE_REASON_BACKING_OFF},
			"n2 sending: pace 2.0 MB/s, backing off: CPU wait 4.1 ms > 3.0 ms (half the target), p99 5.2 ms"},
		{&kvpb.Pace{NodeId: "n4", RateBytes: 2 << 20, P99Ms: 9, TargetMs: 6, Reason: kvpb.PaceReason_PACE_REASON_HOLDING},
			"n4 receiving: pace 2.0 MB/s, holding after a back-off: p99 9.0 ms > target 6.0 ms"},
	} {
		if got := Pace(tc.p); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestSlow(t *testing.T) {
	for _, tt := range []struct {
		in   *kvpb.SlowReplica
		want string
	}{
		{nil, ""},
		{&kvpb.SlowReplica{P90Ms: 48, OthersP90Ms: 4.1, SeenBy: []string{"n1", "n2"}}, "slow for others: p90 48.0ms vs 4.1ms (seen by n1,n2)"},
		{&kvpb.SlowReplica{P90Ms: 8, OthersP90Ms: 1.1, SeenBy: []string{"n1", "n2"}, StalledShare: 0.38},
			"slow for others: p90 8.0ms vs 1.1ms, held calls 38% of the time (seen by n1,n2)"},
	} {
		if got := Slow(tt.in); got != tt.want {
			t.Errorf("Slow(%v): got %q, want %q", tt.in, got, tt.want)
		}
	}
}
