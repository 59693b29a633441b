package cli

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// wantExit is kvctl's exit code for every reason a node answers. The exit codes used to
// follow the gRPC code alone: CLOCK_OFFSET, STALE_VIEW, RANGE_DAMAGED and CAPTURE_BUSY
// (FailedPrecondition) exited 3, "refused as unsafe"; TREE_MISMATCH (InvalidArgument) 2;
// TREE_GONE (NotFound) 4.
var wantExit = map[kvpb.Reason]int{
	kvpb.Reason_REASON_NOT_FOUND:           ExitNotFound,
	kvpb.Reason_REASON_INVALID_ARGUMENT:    ExitUsage,
	kvpb.Reason_REASON_KEY_TOO_LARGE:       ExitUsage,
	kvpb.Reason_REASON_VALUE_TOO_LARGE:     ExitUsage,
	kvpb.Reason_REASON_UNKNOWN_PATH:        ExitUsage,
	kvpb.Reason_REASON_METHOD_NOT_ALLOWED:  ExitUsage,
	kvpb.Reason_REASON_UNIMPLEMENTED:       ExitFailure,
	kvpb.Reason_REASON_DEADLINE_EXCEEDED:   ExitFailure,
	kvpb.Reason_REASON_CANCELED:            ExitFailure,
	kvpb.Reason_REASON_NOT_ENOUGH_REPLICAS: ExitFailure,
	kvpb.Reason_REASON_REPLICA_UNAVAILABLE: ExitFailure,
	kvpb.Reason_REASON_BREAKER_OPEN:        ExitFailure,
	kvpb.Reason_REASON_NOT_ADMITTED:        ExitFailure,
	kvpb.Reason_REASON_CONNECTING:          ExitFailure,
	kvpb.Reason_REASON_COORDINATOR_CLOSED:  ExitFailure,
	kvpb.Reason_REASON_SHUTTING_DOWN:       ExitFailure,
	kvpb.Reason_REASON_STALE_VIEW:          ExitFailure,
	kvpb.Reason_REASON_CLOCK_OFFSET:        ExitFailure,
	kvpb.Reason_REASON_RANGE_DAMAGED:       ExitFailure,
	kvpb.Reason_REASON_DISK_FULL:           ExitFailure,
	kvpb.Reason_REASON_STORE_CLOSED:        ExitFailure,
	kvpb.Reason_REASON_CHECKSUM:            ExitFailure,
	kvpb.Reason_REASON_REFUSED:             ExitRefused,
	kvpb.Reason_REASON_UNSAFE:              ExitRefused,
	kvpb.Reason_REASON_CHANGE_IN_FLIGHT:    ExitRefused,
	kvpb.Reason_REASON_NO_CHANGE:           ExitNotFound,
	kvpb.Reason_REASON_MEMBER_EXISTS:       ExitRefused,
	kvpb.Reason_REASON_UNKNOWN_MEMBER:      ExitNotFound,
	kvpb.Reason_REASON_NO_RING:             ExitFailure,
	kvpb.Reason_REASON_NO_LEADER:           ExitFailure,
	kvpb.Reason_REASON_NOT_LEADER:          ExitFailure,
	kvpb.Reason_REASON_INVALID_CHANGE:      ExitUsage,
	kvpb.Reason_REASON_CLUSTER_CLOSED:      ExitFailure,
	kvpb.Reason_REASON_RAFT_SHUTDOWN:       ExitFailure,
	kvpb.Reason_REASON_REPAIR_REFUSED:      ExitRefused,
	kvpb.Reason_REASON_REPAIR_RUNNING:      ExitRefused,
	kvpb.Reason_REASON_NO_REPAIR:           ExitNotFound,
	kvpb.Reason_REASON_INVALID_REPAIR:      ExitUsage,
	kvpb.Reason_REASON_TREE_MISMATCH:       ExitFailure,
	kvpb.Reason_REASON_TREE_GONE:           ExitFailure,
	kvpb.Reason_REASON_CAPTURE_BUSY:        ExitFailure,
	kvpb.Reason_REASON_UNKNOWN_KIND:        ExitUsage,
	kvpb.Reason_REASON_NOTHING_TO_PAUSE:    ExitRefused,
	kvpb.Reason_REASON_ALREADY_PAUSED:      ExitRefused,
	kvpb.Reason_REASON_NOT_PAUSED:          ExitRefused,
	kvpb.Reason_REASON_NOT_COORDINATOR:     ExitFailure,
	kvpb.Reason_REASON_UNKNOWN_CHANGE:      ExitNotFound,
	kvpb.Reason_REASON_NO_HISTORY:          ExitNotFound,
}

// TestExitCodePerReason: a node's answer of each reason, encoded as the node does, exits
// kvctl with the code decided for its reason, through RPCError and straight from ExitCode;
// the error RPCError returns still matches the node's sentinel.
func TestExitCodePerReason(t *testing.T) {
	for v, name := range kvpb.Reason_name {
		r := kvpb.Reason(v)
		if r == kvpb.Reason_REASON_UNSPECIFIED {
			continue
		}
		t.Run(name, func(t *testing.T) {
			want, ok := wantExit[r]
			if !ok {
				t.Fatalf("no exit code decided for %s", name)
			}
			sentinel := rpcerr.Sentinel(r)
			answer := rpcerr.Encode(fmt.Errorf("the node's words: %w", sentinel))
			if got := ReasonExit(r); got != want {
				t.Errorf("ReasonExit: got %d, want %d", got, want)
			}
			if got := ExitCode(answer); got != want {
				t.Errorf("ExitCode of the raw answer: got %d, want %d", got, want)
			}
			err := RPCError("127.0.0.1:9090", answer)
			if got := ExitCode(err); got != want {
				t.Errorf("ExitCode(RPCError): got %d (%v), want %d", got, err, want)
			}
			if got := ExitCode(fmt.Errorf("kv get: %w", err)); got != want {
				t.Errorf("ExitCode of a wrapped RPCError: got %d, want %d", got, want)
			}
			if !errors.Is(err, sentinel) {
				t.Errorf("RPCError(%v) does not match the node's sentinel", answer)
			}
		})
	}
}

// TestExitCodeWithoutReason: a status without a reason (a transport failure, an auth
// refusal) exits by its code, as kvctl did before reasons.
func TestExitCodeWithoutReason(t *testing.T) {
	for _, tc := range []struct {
		code codes.Code
		want int
	}{
		{codes.Unavailable, ExitFailure},
		{codes.PermissionDenied, ExitFailure},
		{codes.InvalidArgument, ExitUsage},
		{codes.FailedPrecondition, ExitRefused},
		{codes.AlreadyExists, ExitRefused},
		{codes.NotFound, ExitNotFound},
	} {
		err := status.Error(tc.code, "no reason")
		if got := ExitCode(RPCError("a", err)); got != tc.want {
			t.Errorf("%v without reason: got %d, want %d", tc.code, got, tc.want)
		}
	}
}
