package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/node/cluster"
	"ringkv/node/metrics"
	"ringkv/node/replica"
	"ringkv/node/store"
)

var (
	// ErrNotFound: the key is absent or its newest version is a tombstone.
	ErrNotFound = errors.New("not found")
	// ErrUnknownPath: an HTTP path outside the v0 API (400, as the course's servers answer).
	ErrUnknownPath = errors.New("unknown path")
	// ErrMethodNotAllowed: an HTTP method the path does not serve.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrUnimplemented: an RPC whose implementation belongs to a later issue.
	ErrUnimplemented = errors.New("unimplemented")
)

// errorCode is one row of the error table: a domain error and what it becomes on each API.
type errorCode struct {
	err  error
	grpc codes.Code
	http int
}

// errorTable maps domain errors to gRPC codes and HTTP statuses; the first match wins.
// It is the only place where errors become codes.
var errorTable = []errorCode{
	{ErrNotFound, codes.NotFound, http.StatusNotFound},
	{replica.ErrKeyTooLarge, codes.InvalidArgument, http.StatusBadRequest},
	{replica.ErrValueTooLarge, codes.InvalidArgument, http.StatusRequestEntityTooLarge},
	{replica.ErrInvalidArgument, codes.InvalidArgument, http.StatusBadRequest},
	{ErrUnknownPath, codes.InvalidArgument, http.StatusBadRequest},
	{ErrMethodNotAllowed, codes.Unimplemented, http.StatusMethodNotAllowed},
	{replica.ErrNotEnoughReplicas, codes.Unavailable, http.StatusGatewayTimeout},
	{replica.ErrReplicaUnavailable, codes.Unavailable, http.StatusGatewayTimeout},
	{replica.ErrNotAdmitted, codes.Unavailable, http.StatusServiceUnavailable},
	{replica.ErrClosed, codes.Unavailable, http.StatusServiceUnavailable},
	{replica.ErrConnecting, codes.Unavailable, http.StatusServiceUnavailable},
	{context.DeadlineExceeded, codes.DeadlineExceeded, http.StatusGatewayTimeout},
	{context.Canceled, codes.Canceled, 499},
	{store.ErrClosed, codes.Unavailable, http.StatusServiceUnavailable},
	{ErrUnimplemented, codes.Unimplemented, http.StatusNotImplemented},
	{ErrRefused, codes.FailedPrecondition, http.StatusConflict},
	{replica.ErrStaleView, codes.FailedPrecondition, http.StatusServiceUnavailable},
	{ErrChecksum, codes.DataLoss, http.StatusBadGateway},
	{cluster.ErrUnsafe, codes.FailedPrecondition, http.StatusConflict},
	{cluster.ErrChangeInFlight, codes.FailedPrecondition, http.StatusConflict},
	{cluster.ErrMemberExists, codes.AlreadyExists, http.StatusConflict},
	{cluster.ErrUnknownMember, codes.NotFound, http.StatusNotFound},
	{cluster.ErrNoChange, codes.NotFound, http.StatusNotFound},
	{cluster.ErrNoRing, codes.Unavailable, http.StatusServiceUnavailable},
	{cluster.ErrNoLeader, codes.Unavailable, http.StatusServiceUnavailable},
	{cluster.ErrNotLeader, codes.Unavailable, http.StatusServiceUnavailable},
	{cluster.ErrInvalidArgument, codes.InvalidArgument, http.StatusBadRequest},
	{cluster.ErrClosed, codes.Unavailable, http.StatusServiceUnavailable},
	{metrics.ErrCaptureBusy, codes.FailedPrecondition, http.StatusConflict},
	{metrics.ErrUnknownKind, codes.InvalidArgument, http.StatusBadRequest},
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
	return status.Error(row.grpc, err.Error())
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

func errKeyTooLarge(n int) error {
	return fmt.Errorf("%w: key is %d bytes, limit %d", replica.ErrKeyTooLarge, n, MaxKeySize)
}

func errValueTooLarge(n int, limit int64) error {
	return fmt.Errorf("%w: value is %d bytes, limit %d", replica.ErrValueTooLarge, n, limit)
}
