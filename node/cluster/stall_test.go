package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/node/store"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// TestStallCause: a stalled pull's last error names its cause by the reason it carries.
func TestStallCause(t *testing.T) {
	wire := func(err error) error { return rpcerr.Decode(rpcerr.Encode(err)) }
	for _, tt := range []struct {
		name   string
		err    error
		cause  kvpb.StallCause
		reason string
	}{
		{"receiver disk full", fmt.Errorf("stream range from n1: apply: %w", store.ErrDiskFull), kvpb.StallCause_STALL_CAUSE_DISK_FULL, "DISK_FULL"},
		{"source refuses a stale view", fmt.Errorf("stream range from n1: %w", wire(rpcerr.New(kvpb.Reason_REASON_STALE_VIEW, "stale ring view"))), kvpb.StallCause_STALL_CAUSE_REFUSED, "STALE_VIEW"},
		{"source shutting down", wire(rpcerr.New(kvpb.Reason_REASON_SHUTTING_DOWN, "shutting down")), kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE, "SHUTTING_DOWN"},
		{"connection refused", rpcerr.Decode(status.Error(codes.Unavailable, "connection refused")), kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE, ""},
		{"deadline", context.DeadlineExceeded, kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE, "DEADLINE_EXCEEDED"},
		{"no source in the ring", fmt.Errorf("move 3: no source in the current ring: %w", ErrUnknownMember), kvpb.StallCause_STALL_CAUSE_FAILING, "UNKNOWN_MEMBER"},
		{"plain error", errors.New("stream ended"), kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cause, reason := stallCause(tt.err)
			if cause != tt.cause || reason != tt.reason {
				t.Errorf("got %v %q, want %v %q", cause, reason, tt.cause, tt.reason)
			}
		})
	}
}
