// Package rpcerr is the one table where a ringkv error meets the wire (etcd's rpctypes): each
// reason of kvpb.Reason has one gRPC code, one HTTP status, one metric kind and one answer
// to "is the peer that sent it alive". Servers encode through it (Encode, HTTPStatus),
// clients decode through it (Decode, ReasonOf), metrics classify by it (Kind) and the
// coordinator's circuit breakers ask it (Alive).
//
// Domain packages keep deciding: their sentinels are *Error values made by New with their
// reason, declared in their own errors.go, and their callers keep using errors.Is. An error
// decoded from a status carries the same reason, so errors.Is(decoded, sentinel) holds on
// the other side of the wire.
//
// It imports the generated proto package (for the Reason enum, the vocabulary shared by
// both ends) and nothing else of the repository, so kvctl and the console decode errors
// without linking the node.
package rpcerr

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
)

// Domain is the domain of the errdetails.ErrorInfo that carries a reason in a gRPC status.
const Domain = "ringkv"

// Error is a domain error with a reason. Sentinels are *Error values; an error matches a
// sentinel (errors.Is) when it has the sentinel's reason.
type Error struct {
	reason kvpb.Reason
	msg    string
}

// New returns a sentinel error with reason r and text msg.
func New(r kvpb.Reason, msg string) *Error { return &Error{reason: r, msg: msg} }

func (e *Error) Error() string { return e.msg }

// Reason is e's reason.
func (e *Error) Reason() kvpb.Reason { return e.reason }

// Is reports whether target is an *Error of the same reason.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.reason == e.reason
}

// Metric kinds of an error (the "kind" label of the error counters).
const (
	KindTimeout     = "timeout"
	KindCanceled    = "canceled"
	KindUnavailable = "unavailable"
	KindBreakerOpen = "breaker_open"
	KindInvalid     = "invalid"
	KindInternal    = "internal"
)

// Row is one line of the table: what an error of Reason becomes on each surface.
type Row struct {
	Reason kvpb.Reason
	Code   codes.Code
	HTTP   int
	// Kind is the metric kind (one of the Kind constants).
	Kind string
	// Alive: a peer that answered this is up (a refusal or a verdict, not a failure to
	// answer); it does not count against the peer's circuit breaker.
	Alive bool
}

const statusClientClosed = 499 // nginx's "client closed request"

// table is in precedence order: an error that wraps several reasons gets the first row that
// matches.
var table = []Row{
	{kvpb.Reason_REASON_NOT_FOUND, codes.NotFound, http.StatusNotFound, KindInternal, true},
	{kvpb.Reason_REASON_KEY_TOO_LARGE, codes.InvalidArgument, http.StatusBadRequest, KindInvalid, true},
	{kvpb.Reason_REASON_VALUE_TOO_LARGE, codes.InvalidArgument, http.StatusRequestEntityTooLarge, KindInvalid, true},
	{kvpb.Reason_REASON_INVALID_ARGUMENT, codes.InvalidArgument, http.StatusBadRequest, KindInvalid, true},
	{kvpb.Reason_REASON_UNKNOWN_PATH, codes.InvalidArgument, http.StatusBadRequest, KindInvalid, true},
	{kvpb.Reason_REASON_METHOD_NOT_ALLOWED, codes.Unimplemented, http.StatusMethodNotAllowed, KindInternal, true},
	// Before NOT_ENOUGH_REPLICAS: a write that failed because replicas' disks are full is 507.
	{kvpb.Reason_REASON_DISK_FULL, codes.ResourceExhausted, http.StatusInsufficientStorage, KindInternal, true},
	{kvpb.Reason_REASON_NOT_ENOUGH_REPLICAS, codes.Unavailable, http.StatusGatewayTimeout, KindUnavailable, false},
	{kvpb.Reason_REASON_REPLICA_UNAVAILABLE, codes.Unavailable, http.StatusGatewayTimeout, KindUnavailable, false},
	{kvpb.Reason_REASON_BREAKER_OPEN, codes.Unavailable, http.StatusGatewayTimeout, KindBreakerOpen, false},
	{kvpb.Reason_REASON_NOT_ADMITTED, codes.Unavailable, http.StatusServiceUnavailable, KindUnavailable, true},
	{kvpb.Reason_REASON_COORDINATOR_CLOSED, codes.Unavailable, http.StatusServiceUnavailable, KindUnavailable, false},
	{kvpb.Reason_REASON_CONNECTING, codes.Unavailable, http.StatusServiceUnavailable, KindUnavailable, false},
	{kvpb.Reason_REASON_SHUTTING_DOWN, codes.Unavailable, http.StatusServiceUnavailable, KindUnavailable, false},
	{kvpb.Reason_REASON_DEADLINE_EXCEEDED, codes.DeadlineExceeded, http.StatusGatewayTimeout, KindTimeout, false},
	{kvpb.Reason_REASON_CANCELED, codes.Canceled, statusClientClosed, KindCanceled, false},
	{kvpb.Reason_REASON_STORE_CLOSED, codes.Unavailable, http.StatusServiceUnavailable, KindUnavailable, false},
	{kvpb.Reason_REASON_UNIMPLEMENTED, codes.Unimplemented, http.StatusNotImplemented, KindInternal, false},
	{kvpb.Reason_REASON_REFUSED, codes.FailedPrecondition, http.StatusConflict, KindInternal, true},
	{kvpb.Reason_REASON_REPAIR_REFUSED, codes.FailedPrecondition, http.StatusConflict, KindInternal, true},
	{kvpb.Reason_REASON_REPAIR_RUNNING, codes.FailedPrecondition, http.StatusConflict, KindInternal, true},
	{kvpb.Reason_REASON_NO_REPAIR, codes.NotFound, http.StatusNotFound, KindInternal, true},
	{kvpb.Reason_REASON_INVALID_REPAIR, codes.InvalidArgument, http.StatusBadRequest, KindInvalid, true},
	{kvpb.Reason_REASON_NOT_COORDINATOR, codes.FailedPrecondition, http.StatusConflict, KindInternal, true},
	{kvpb.Reason_REASON_TREE_MISMATCH, codes.InvalidArgument, http.StatusBadRequest, KindInvalid, true},
	{kvpb.Reason_REASON_TREE_GONE, codes.NotFound, http.StatusNotFound, KindInternal, true},
	{kvpb.Reason_REASON_STALE_VIEW, codes.FailedPrecondition, http.StatusServiceUnavailable, KindInternal, true},
	{kvpb.Reason_REASON_CHECKSUM, codes.DataLoss, http.StatusBadGateway, KindInternal, false},
	{kvpb.Reason_REASON_UNSAFE, codes.FailedPrecondition, http.StatusConflict, KindInternal, true},
	{kvpb.Reason_REASON_CHANGE_IN_FLIGHT, codes.FailedPrecondition, http.StatusConflict, KindInternal, true},
	{kvpb.Reason_REASON_MEMBER_EXISTS, codes.AlreadyExists, http.StatusConflict, KindInternal, true},
	{kvpb.Reason_REASON_UNKNOWN_MEMBER, codes.NotFound, http.StatusNotFound, KindInternal, true},
	{kvpb.Reason_REASON_NO_CHANGE, codes.NotFound, http.StatusNotFound, KindInternal, true},
	{kvpb.Reason_REASON_UNKNOWN_CHANGE, codes.NotFound, http.StatusNotFound, KindInternal, true},
	{kvpb.Reason_REASON_NO_HISTORY, codes.NotFound, http.StatusNotFound, KindInternal, true},
	{kvpb.Reason_REASON_NOTHING_TO_PAUSE, codes.FailedPrecondition, http.StatusConflict, KindInternal, true},
	{kvpb.Reason_REASON_ALREADY_PAUSED, codes.FailedPrecondition, http.StatusConflict, KindInternal, true},
	{kvpb.Reason_REASON_NOT_PAUSED, codes.FailedPrecondition, http.StatusConflict, KindInternal, true},
	{kvpb.Reason_REASON_NO_RING, codes.Unavailable, http.StatusServiceUnavailable, KindUnavailable, false},
	{kvpb.Reason_REASON_NO_LEADER, codes.Unavailable, http.StatusServiceUnavailable, KindUnavailable, false},
	{kvpb.Reason_REASON_NOT_LEADER, codes.Unavailable, http.StatusServiceUnavailable, KindUnavailable, false},
	{kvpb.Reason_REASON_INVALID_CHANGE, codes.InvalidArgument, http.StatusBadRequest, KindInvalid, true},
	{kvpb.Reason_REASON_CLUSTER_CLOSED, codes.Unavailable, http.StatusServiceUnavailable, KindUnavailable, false},
	{kvpb.Reason_REASON_RAFT_SHUTDOWN, codes.Unavailable, http.StatusServiceUnavailable, KindUnavailable, false},
	{kvpb.Reason_REASON_CAPTURE_BUSY, codes.FailedPrecondition, http.StatusConflict, KindInternal, true},
	{kvpb.Reason_REASON_UNKNOWN_KIND, codes.InvalidArgument, http.StatusBadRequest, KindInvalid, true},
	// After NOT_ENOUGH_REPLICAS: a read that failed because a damaged replica refused stays a 504.
	{kvpb.Reason_REASON_RANGE_DAMAGED, codes.FailedPrecondition, http.StatusServiceUnavailable, KindInternal, true},
	// After NOT_ENOUGH_REPLICAS: a 504 whose replicas refused a timestamp stays a 504.
	{kvpb.Reason_REASON_CLOCK_OFFSET, codes.FailedPrecondition, http.StatusServiceUnavailable, KindInternal, true},
}

// kindOrder is the precedence of metric kinds: an operation that ran out of time counts as a
// timeout whatever else its error wraps.
var kindOrder = []string{KindTimeout, KindCanceled, KindBreakerOpen, KindUnavailable, KindInvalid}

// Rows returns a copy of the table, in precedence order.
func Rows() []Row { return append([]Row(nil), table...) }

// RowOf returns the row of reason r; ok=false for REASON_UNSPECIFIED or an unknown value.
func RowOf(r kvpb.Reason) (Row, bool) {
	for _, row := range table {
		if row.Reason == r {
			return row, true
		}
	}
	return Row{}, false
}

// Sentinel returns an error that matches (errors.Is) every error of reason r.
func Sentinel(r kvpb.Reason) error {
	switch r {
	case kvpb.Reason_REASON_DEADLINE_EXCEEDED:
		return context.DeadlineExceeded
	case kvpb.Reason_REASON_CANCELED:
		return context.Canceled
	}
	return &Error{reason: r}
}

func matches(err error, r kvpb.Reason) bool { return errors.Is(err, Sentinel(r)) }

// Lookup returns the first row, in precedence order, whose reason err carries.
func Lookup(err error) (Row, bool) {
	if err == nil {
		return Row{}, false
	}
	for _, row := range table {
		if matches(err, row.Reason) {
			return row, true
		}
	}
	return Row{}, false
}

// ReasonOf is the reason err carries: a sentinel's, a decoded status's, or the one in the
// ErrorInfo of a status not decoded yet. REASON_UNSPECIFIED when it has none.
func ReasonOf(err error) kvpb.Reason {
	if row, ok := Lookup(err); ok {
		return row.Reason
	}
	if st, ok := status.FromError(err); ok && err != nil {
		return statusReason(st)
	}
	return kvpb.Reason_REASON_UNSPECIFIED
}

// Name is r on the wire: its enum name without the REASON_ prefix ("STALE_VIEW").
func Name(r kvpb.Reason) string { return strings.TrimPrefix(r.String(), "REASON_") }

func parseName(s string) kvpb.Reason {
	if v, ok := kvpb.Reason_value["REASON_"+s]; ok && s != "" {
		return kvpb.Reason(v)
	}
	return kvpb.Reason_REASON_UNSPECIFIED
}

// statusReason reads the reason of st's ErrorInfo of Domain.
func statusReason(st *status.Status) kvpb.Reason {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return parseName(info.GetReason())
		}
	}
	return kvpb.Reason_REASON_UNSPECIFIED
}

// Encode turns a domain error into a gRPC status error: the code of its row, its message,
// and its reason in an ErrorInfo of Domain. nil stays nil; an error that already carries a
// status keeps it; an error of no row is Internal.
func Encode(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	row, ok := Lookup(err)
	if !ok {
		return status.Error(codes.Internal, err.Error())
	}
	st := status.New(row.Code, err.Error())
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: Name(row.Reason), Domain: Domain}); derr == nil {
		st = d
	}
	return st.Err()
}

// HTTPStatus is the HTTP status of a domain error (500 for an error of no row).
func HTTPStatus(err error) int {
	row, ok := Lookup(err)
	if !ok {
		return http.StatusInternalServerError
	}
	return row.HTTP
}

// Kind is the metric kind of an error: the first of timeout, canceled, breaker_open,
// unavailable, invalid that a reason it carries has; else by its gRPC code; else internal.
func Kind(err error) string {
	for _, k := range kindOrder {
		for _, row := range table {
			if row.Kind == k && matches(err, row.Reason) {
				return k
			}
		}
	}
	if s, ok := status.FromError(err); ok && err != nil {
		switch s.Code() {
		case codes.DeadlineExceeded:
			return KindTimeout
		case codes.Canceled:
			return KindCanceled
		case codes.Unavailable:
			return KindUnavailable
		case codes.InvalidArgument, codes.OutOfRange:
			return KindInvalid
		}
	}
	return KindInternal
}

// Alive reports whether err is an answer from a live peer (some reason it carries is Alive):
// a refusal that must not count against the peer's circuit breaker.
func Alive(err error) bool {
	for _, row := range table {
		if row.Alive && matches(err, row.Reason) {
			return true
		}
	}
	return false
}

// Decode turns a gRPC status error from a ringkv node back into an error of its reason:
// errors.Is(Decode(err), sentinel) holds for the sentinel the server encoded, and for
// context.DeadlineExceeded / context.Canceled on those codes. Its text is the status message
// (the server's words); it keeps the status (status.FromError, Encode pass it on). An error without a status, or a status without a reason
// (a transport failure), comes back as it is.
func Decode(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	r := statusReason(st)
	if r == kvpb.Reason_REASON_UNSPECIFIED {
		switch st.Code() {
		case codes.DeadlineExceeded:
			r = kvpb.Reason_REASON_DEADLINE_EXCEEDED
		case codes.Canceled:
			r = kvpb.Reason_REASON_CANCELED
		default:
			return err
		}
	}
	return &wireError{err: err, st: st, reason: r}
}

// wireError is a status error decoded to its reason.
type wireError struct {
	err    error
	st     *status.Status
	reason kvpb.Reason
}

func (e *wireError) Error() string              { return e.st.Message() }
func (e *wireError) Unwrap() error              { return e.err }
func (e *wireError) GRPCStatus() *status.Status { return e.st }
func (e *wireError) Is(target error) bool {
	if t, ok := target.(*Error); ok {
		return t.reason == e.reason
	}
	return target != nil && target == Sentinel(e.reason)
}

// Reason is the reason e was decoded to.
func (e *wireError) Reason() kvpb.Reason { return e.reason }
