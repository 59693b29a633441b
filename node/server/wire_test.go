package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/status"

	"ringkv/node/admin"
	"ringkv/node/change"
	"ringkv/node/cluster"
	"ringkv/node/hlc"
	"ringkv/node/metrics"
	"ringkv/node/repair"
	"ringkv/node/replica"
	"ringkv/node/store"
	"ringkv/node/stream"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// domainErrors is every domain error that meets the wire, with its reason.
var domainErrors = []struct {
	err    error
	reason kvpb.Reason
}{
	{ErrNotFound, kvpb.Reason_REASON_NOT_FOUND},
	{ErrUnknownPath, kvpb.Reason_REASON_UNKNOWN_PATH},
	{ErrMethodNotAllowed, kvpb.Reason_REASON_METHOD_NOT_ALLOWED},
	{ErrUnimplemented, kvpb.Reason_REASON_UNIMPLEMENTED},
	{ErrShuttingDown, kvpb.Reason_REASON_SHUTTING_DOWN},
	{context.DeadlineExceeded, kvpb.Reason_REASON_DEADLINE_EXCEEDED},
	{context.Canceled, kvpb.Reason_REASON_CANCELED},
	{replica.ErrInvalidArgument, kvpb.Reason_REASON_INVALID_ARGUMENT},
	{replica.ErrKeyTooLarge, kvpb.Reason_REASON_KEY_TOO_LARGE},
	{replica.ErrValueTooLarge, kvpb.Reason_REASON_VALUE_TOO_LARGE},
	{replica.ErrNotEnoughReplicas, kvpb.Reason_REASON_NOT_ENOUGH_REPLICAS},
	{replica.ErrReplicaUnavailable, kvpb.Reason_REASON_REPLICA_UNAVAILABLE},
	{replica.ErrBreakerOpen, kvpb.Reason_REASON_BREAKER_OPEN},
	{replica.ErrNotAdmitted, kvpb.Reason_REASON_NOT_ADMITTED},
	{replica.ErrConnecting, kvpb.Reason_REASON_CONNECTING},
	{replica.ErrClosed, kvpb.Reason_REASON_COORDINATOR_CLOSED},
	{replica.ErrStaleView, kvpb.Reason_REASON_STALE_VIEW},
	{replica.ErrRangeDamaged, kvpb.Reason_REASON_RANGE_DAMAGED},
	{hlc.ErrClockOffset, kvpb.Reason_REASON_CLOCK_OFFSET},
	{store.ErrDiskFull, kvpb.Reason_REASON_DISK_FULL},
	{store.ErrClosed, kvpb.Reason_REASON_STORE_CLOSED},
	{stream.ErrChecksum, kvpb.Reason_REASON_CHECKSUM},
	{change.ErrRefused, kvpb.Reason_REASON_REFUSED},
	{cluster.ErrUnsafe, kvpb.Reason_REASON_UNSAFE},
	{cluster.ErrChangeInFlight, kvpb.Reason_REASON_CHANGE_IN_FLIGHT},
	{cluster.ErrNoChange, kvpb.Reason_REASON_NO_CHANGE},
	{cluster.ErrUnknownChange, kvpb.Reason_REASON_UNKNOWN_CHANGE},
	{cluster.ErrNoHistory, kvpb.Reason_REASON_NO_HISTORY},
	{cluster.ErrMemberExists, kvpb.Reason_REASON_MEMBER_EXISTS},
	{cluster.ErrUnknownMember, kvpb.Reason_REASON_UNKNOWN_MEMBER},
	{cluster.ErrNoRing, kvpb.Reason_REASON_NO_RING},
	{cluster.ErrNoLeader, kvpb.Reason_REASON_NO_LEADER},
	{cluster.ErrNotLeader, kvpb.Reason_REASON_NOT_LEADER},
	{cluster.ErrInvalidArgument, kvpb.Reason_REASON_INVALID_CHANGE},
	{cluster.ErrClosed, kvpb.Reason_REASON_CLUSTER_CLOSED},
	{cluster.ErrNotCoordinator, kvpb.Reason_REASON_NOT_COORDINATOR},
	{cluster.ErrNoRepairToPause, kvpb.Reason_REASON_NOTHING_TO_PAUSE},
	{cluster.ErrRepairAlreadyPaused, kvpb.Reason_REASON_ALREADY_PAUSED},
	{cluster.ErrRepairNotPaused, kvpb.Reason_REASON_NOT_PAUSED},
	// node/cluster's own, unexported: the raft transport's end.
	{rpcerr.New(kvpb.Reason_REASON_RAFT_SHUTDOWN, "raft transport shut down"), kvpb.Reason_REASON_RAFT_SHUTDOWN},
	{repair.ErrRefused, kvpb.Reason_REASON_REPAIR_REFUSED},
	{repair.ErrRunning, kvpb.Reason_REASON_REPAIR_RUNNING},
	{repair.ErrNoRepair, kvpb.Reason_REASON_NO_REPAIR},
	{repair.ErrInvalidArgument, kvpb.Reason_REASON_INVALID_REPAIR},
	{repair.ErrTreeMismatch, kvpb.Reason_REASON_TREE_MISMATCH},
	{repair.ErrTreeGone, kvpb.Reason_REASON_TREE_GONE},
	{admin.ErrCaptureBusy, kvpb.Reason_REASON_CAPTURE_BUSY},
	{admin.ErrUnknownKind, kvpb.Reason_REASON_UNKNOWN_KIND},
}

// TestEveryDomainErrorRoundTrips: every domain error encoded by a server comes back through
// each client's decoder (rpcerr.Decode: the cluster client, kvctl, the console;
// replica.FromStatus: the replica and stream clients) as an error that matches the same
// sentinel, with the one code, HTTP status, metric kind and liveness of its reason. The old
// tables disagreed: node/cluster gave ErrNoChange and ErrNoRing FailedPrecondition where
// node/server gave NotFound and Unavailable; replica.FromStatus turned every Unavailable
// (NOT_ADMITTED included, which the coordinator counted as a live refusal) into
// ErrReplicaUnavailable and every other FailedPrecondition into a bare status;
// metrics.DefaultErrorKind counted the sentinels it did not list (CONNECTING, STORE_CLOSED,
// NO_LEADER...) as internal.
func TestEveryDomainErrorRoundTrips(t *testing.T) {
	covered := map[kvpb.Reason]bool{}
	for _, tc := range domainErrors {
		covered[tc.reason] = true
		t.Run(rpcerr.Name(tc.reason), func(t *testing.T) {
			row, ok := rpcerr.RowOf(tc.reason)
			if !ok {
				t.Fatalf("no row for %v", tc.reason)
			}
			if got := rpcerr.ReasonOf(tc.err); got != tc.reason {
				t.Fatalf("reason of %v: got %v, want %v", tc.err, got, tc.reason)
			}
			enc := rpcerr.Encode(fmt.Errorf("some call: %w", tc.err))
			if got := status.Code(enc); got != row.Code {
				t.Fatalf("code: got %v, want %v", got, row.Code)
			}
			if got := rpcerr.HTTPStatus(tc.err); got != row.HTTP {
				t.Errorf("HTTP status: got %d, want %d", got, row.HTTP)
			}
			if got := metrics.DefaultErrorKind(tc.err); got != row.Kind {
				t.Errorf("metric kind: got %s, want %s", got, row.Kind)
			}
			for name, dec := range map[string]error{
				"rpcerr.Decode":      rpcerr.Decode(enc),
				"replica.FromStatus": replica.FromStatus(enc),
			} {
				if !errors.Is(dec, tc.err) {
					t.Errorf("%s(%v): does not match %v", name, enc, tc.err)
				}
				if got := status.Code(rpcerr.Encode(dec)); got != row.Code {
					t.Errorf("%s: code passed on by the caller: got %v, want %v", name, got, row.Code)
				}
				if got := rpcerr.Alive(dec); got != row.Alive {
					t.Errorf("%s: peer alive after this answer: got %v, want %v", name, got, row.Alive)
				}
			}
			if got := rpcerr.HTTPStatus(rpcerr.Decode(enc)); got != row.HTTP {
				t.Errorf("HTTP status on the caller's side: got %d, want %d", got, row.HTTP)
			}
		})
	}
	for v, name := range kvpb.Reason_name {
		if r := kvpb.Reason(v); r != kvpb.Reason_REASON_UNSPECIFIED && !covered[r] {
			t.Errorf("reason %s has no domain error in this test", name)
		}
	}
}
