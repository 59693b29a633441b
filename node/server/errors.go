package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/node/admin"
	"ringkv/node/change"
	"ringkv/node/cluster"
	"ringkv/node/hlc"
	"ringkv/node/repair"
	"ringkv/node/replica"
	"ringkv/node/store"
	"ringkv/node/stream"
)

var (
	// ErrNotFound: the key is absent or its newest version is a tombstone.
	ErrNotFound = errors.New("not found")
	// ErrUnknownPath: an HTTP path outside the v0 API (400, as the course's servers answer).
	ErrUnknownPath = errors.New("unknown path")
	// ErrMethodNotAllowed: an HTTP method the path does not serve.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrUnimplemented: an RPC this node was built without (its dependency is nil).
	ErrUnimplemented = errors.New("unimplemented")
)

// errorCode is one row of the error table: a domain error and what it becomes on each API.
// reason, in an errdetails.ErrorInfo of replica.ErrorDomain, tells apart the errors that
// share a gRPC code (replica.FromStatus reads it).
type errorCode struct {
	err    error
	grpc   codes.Code
	http   int
	reason string
}

// errorTable maps domain errors to gRPC codes and HTTP statuses; the first match wins.
// It is the only place where errors become codes.
var errorTable = []errorCode{
	{ErrNotFound, codes.NotFound, http.StatusNotFound, "NOT_FOUND"},
	{replica.ErrKeyTooLarge, codes.InvalidArgument, http.StatusBadRequest, "KEY_TOO_LARGE"},
	{replica.ErrValueTooLarge, codes.InvalidArgument, http.StatusRequestEntityTooLarge, "VALUE_TOO_LARGE"},
	{replica.ErrInvalidArgument, codes.InvalidArgument, http.StatusBadRequest, "INVALID_ARGUMENT"},
	{ErrUnknownPath, codes.InvalidArgument, http.StatusBadRequest, "UNKNOWN_PATH"},
	{ErrMethodNotAllowed, codes.Unimplemented, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED"},
	// Before NOT_ENOUGH_REPLICAS: a write that failed because replicas' disks are full is 507.
	{store.ErrDiskFull, codes.ResourceExhausted, http.StatusInsufficientStorage, replica.ReasonDiskFull},
	{replica.ErrNotEnoughReplicas, codes.Unavailable, http.StatusGatewayTimeout, "NOT_ENOUGH_REPLICAS"},
	{replica.ErrReplicaUnavailable, codes.Unavailable, http.StatusGatewayTimeout, "REPLICA_UNAVAILABLE"},
	{replica.ErrNotAdmitted, codes.Unavailable, http.StatusServiceUnavailable, "NOT_ADMITTED"},
	{replica.ErrClosed, codes.Unavailable, http.StatusServiceUnavailable, "COORDINATOR_CLOSED"},
	{replica.ErrConnecting, codes.Unavailable, http.StatusServiceUnavailable, "CONNECTING"},
	{context.DeadlineExceeded, codes.DeadlineExceeded, http.StatusGatewayTimeout, "DEADLINE_EXCEEDED"},
	{context.Canceled, codes.Canceled, 499, "CANCELED"},
	{store.ErrClosed, codes.Unavailable, http.StatusServiceUnavailable, "STORE_CLOSED"},
	{ErrUnimplemented, codes.Unimplemented, http.StatusNotImplemented, "UNIMPLEMENTED"},
	{change.ErrRefused, codes.FailedPrecondition, http.StatusConflict, "REFUSED"},
	{repair.ErrRefused, codes.FailedPrecondition, http.StatusConflict, "REPAIR_REFUSED"},
	{repair.ErrRunning, codes.FailedPrecondition, http.StatusConflict, "REPAIR_RUNNING"},
	{repair.ErrNoRepair, codes.NotFound, http.StatusNotFound, "NO_REPAIR"},
	{repair.ErrInvalidArgument, codes.InvalidArgument, http.StatusBadRequest, "INVALID_REPAIR"},
	{repair.ErrTreeMismatch, codes.InvalidArgument, http.StatusBadRequest, "TREE_MISMATCH"},
	{repair.ErrTreeGone, codes.NotFound, http.StatusNotFound, "TREE_GONE"},
	{replica.ErrStaleView, codes.FailedPrecondition, http.StatusServiceUnavailable, replica.ReasonStaleView},
	{stream.ErrChecksum, codes.DataLoss, http.StatusBadGateway, "CHECKSUM"},
	{cluster.ErrUnsafe, codes.FailedPrecondition, http.StatusConflict, "UNSAFE"},
	{cluster.ErrChangeInFlight, codes.FailedPrecondition, http.StatusConflict, "CHANGE_IN_FLIGHT"},
	{cluster.ErrMemberExists, codes.AlreadyExists, http.StatusConflict, "MEMBER_EXISTS"},
	{cluster.ErrUnknownMember, codes.NotFound, http.StatusNotFound, "UNKNOWN_MEMBER"},
	{cluster.ErrNoChange, codes.NotFound, http.StatusNotFound, "NO_CHANGE"},
	{cluster.ErrNoRing, codes.Unavailable, http.StatusServiceUnavailable, "NO_RING"},
	{cluster.ErrNoLeader, codes.Unavailable, http.StatusServiceUnavailable, "NO_LEADER"},
	{cluster.ErrNotLeader, codes.Unavailable, http.StatusServiceUnavailable, "NOT_LEADER"},
	{cluster.ErrInvalidArgument, codes.InvalidArgument, http.StatusBadRequest, "INVALID_CHANGE"},
	{cluster.ErrClosed, codes.Unavailable, http.StatusServiceUnavailable, "CLUSTER_CLOSED"},
	{admin.ErrCaptureBusy, codes.FailedPrecondition, http.StatusConflict, "CAPTURE_BUSY"},
	{admin.ErrUnknownKind, codes.InvalidArgument, http.StatusBadRequest, "UNKNOWN_KIND"},
	// After ErrNotEnoughReplicas: a read that failed because a damaged replica refused stays a 504.
	{replica.ErrRangeDamaged, codes.FailedPrecondition, http.StatusServiceUnavailable, replica.ReasonRangeDamaged},
	// After ErrNotEnoughReplicas: a 504 whose replicas refused a timestamp stays a 504.
	{hlc.ErrClockOffset, codes.FailedPrecondition, http.StatusServiceUnavailable, replica.ReasonClockOffset},
}

// lookup finds err's row; ok=false for an unknown error (Internal / 500).
func lookup(err error) (errorCode, bool) {
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			return row, true
		}
	}
	return errorCode{}, false
}

// GRPCError turns a domain error into a gRPC status error. nil stays nil; an error that
// already carries a status keeps it.
func GRPCError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	row, ok := lookup(err)
	if !ok {
		return status.Error(codes.Internal, err.Error())
	}
	st := status.New(row.grpc, err.Error())
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: row.reason, Domain: replica.ErrorDomain}); derr == nil {
		st = d
	}
	return st.Err()
}

// HTTPStatus is the HTTP status for a domain error (500 when unknown).
func HTTPStatus(err error) int {
	row, ok := lookup(err)
	if !ok {
		return http.StatusInternalServerError
	}
	return row.http
}

var errEmptyKey = fmt.Errorf("%w: empty key", replica.ErrInvalidArgument)
