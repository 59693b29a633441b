package cli

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// Exit codes of kvctl, mapped in one place (ExitCode, ReasonExit).
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
	// ExitRefused: the cluster refused an unsafe operation (see --force).
	ExitRefused = 3
	// ExitNotFound: what was asked for does not exist (kvctl get of a missing key, a node
	// that is no member): an answer, not a failure to get one.
	ExitNotFound = 4
)

var (
	// ErrUsage marks a bad flag or argument.
	ErrUsage = errors.New("usage")
	// ErrRefused marks an operation refused as unsafe.
	ErrRefused = errors.New("refused")
	// ErrNotFound marks an answer that the key (or member) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrCancelled marks an operation the user declined at a prompt.
	ErrCancelled = errors.New("cancelled")
)

// UsageErrorf returns an error that exits with ExitUsage.
func UsageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// RefusedErrorf returns an error that exits with ExitRefused.
func RefusedErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, a...))
}

// ExitCode maps an error returned by a command to the process exit code. A gRPC status
// that no command translated (RPCError) is mapped by its reason, as RPCError would.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrRefused):
		return ExitRefused
	case errors.Is(err, ErrNotFound):
		return ExitNotFound
	}
	if _, ok := status.FromError(err); ok {
		return statusExit(err)
	}
	return ExitFailure
}

// ReasonExit is kvctl's exit code for a node's answer of reason r, the one table from a
// reason to an exit code:
//   - 2 usage: the request itself is wrong (a bad argument, a key or value over its limit,
//     a malformed ring change or repair, an unknown profile kind);
//   - 3 refused as unsafe: the cluster refused the operation as it stands (a plan with
//     refusals, a change that would lose replicas, a change or repair already running, a
//     member that exists, a pause with nothing streaming or already paused, a resume of what
//     is not paused); --force or waiting changes the answer;
//   - 4 not found: what was named does not exist (a key, a member, a change or repair, a
//     change in the history, any history at all);
//   - 1 failure: everything else, the node could not do it now (unavailable, no leader, a
//     stale ring view, a clock offset, a damaged range, a full disk, a busy capture).
func ReasonExit(r kvpb.Reason) int {
	switch r {
	case kvpb.Reason_REASON_INVALID_ARGUMENT, kvpb.Reason_REASON_KEY_TOO_LARGE,
		kvpb.Reason_REASON_VALUE_TOO_LARGE, kvpb.Reason_REASON_UNKNOWN_PATH,
		kvpb.Reason_REASON_METHOD_NOT_ALLOWED, kvpb.Reason_REASON_INVALID_CHANGE,
		kvpb.Reason_REASON_INVALID_REPAIR, kvpb.Reason_REASON_UNKNOWN_KIND:
		return ExitUsage
	case kvpb.Reason_REASON_REFUSED, kvpb.Reason_REASON_UNSAFE, kvpb.Reason_REASON_CHANGE_IN_FLIGHT,
		kvpb.Reason_REASON_MEMBER_EXISTS, kvpb.Reason_REASON_REPAIR_REFUSED,
		kvpb.Reason_REASON_REPAIR_RUNNING, kvpb.Reason_REASON_NOTHING_TO_PAUSE, kvpb.Reason_REASON_ALREADY_PAUSED,
		kvpb.Reason_REASON_NOT_PAUSED:
		return ExitRefused
	case kvpb.Reason_REASON_NOT_FOUND, kvpb.Reason_REASON_UNKNOWN_MEMBER,
		kvpb.Reason_REASON_NO_CHANGE, kvpb.Reason_REASON_NO_REPAIR,
		kvpb.Reason_REASON_UNKNOWN_CHANGE, kvpb.Reason_REASON_NO_HISTORY:
		return ExitNotFound
	}
	return ExitFailure
}

// statusExit is the exit code of a gRPC error: by its reason. A status without one (a
// transport failure, an auth refusal) goes by its code: InvalidArgument is a usage error,
// FailedPrecondition and AlreadyExists a refusal, NotFound not found, the rest a failure.
func statusExit(err error) int {
	if r := rpcerr.ReasonOf(err); r != kvpb.Reason_REASON_UNSPECIFIED {
		return ReasonExit(r)
	}
	switch status.Code(err) {
	case codes.InvalidArgument:
		return ExitUsage
	case codes.FailedPrecondition, codes.AlreadyExists:
		return ExitRefused
	case codes.NotFound:
		return ExitNotFound
	}
	return ExitFailure
}

// RPCError turns an error of a call to the node at addr into kvctl's one-line reason and
// exit code: "usage: node 127.0.0.1:9090: ..." (exit 2), "refused: node ...: ..." (exit 3),
// "not found: node ...: ..." (exit 4), "node 127.0.0.1:9090: unavailable: ..." (exit 1).
// Every command maps gRPC errors here. The error is decoded through the one error table
// (rpcerr.Decode): it still matches the sentinel of the node's reason.
func RPCError(addr string, err error) error {
	s, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("node %s: %w", addr, err)
	}
	dec := rpcerr.Decode(err)
	switch statusExit(dec) {
	case ExitUsage:
		return &rpcError{fmt.Sprintf("%s: node %s: %s", ErrUsage, addr, s.Message()), ErrUsage, dec}
	case ExitRefused:
		return &rpcError{fmt.Sprintf("%s: node %s: %s", ErrRefused, addr, s.Message()), ErrRefused, dec}
	case ExitNotFound:
		return &rpcError{fmt.Sprintf("%s: node %s: %s", ErrNotFound, addr, s.Message()), ErrNotFound, dec}
	}
	return &rpcError{fmt.Sprintf("node %s: %s: %s", addr, present.Code(s.Code()), s.Message()), nil, dec}
}

// rpcError is a node's answer in kvctl's words: its exit mark (ErrUsage, ErrRefused,
// ErrNotFound or none) and the decoded error stay in the chain.
type rpcError struct {
	text string
	mark error
	err  error
}

func (e *rpcError) Error() string { return e.text }

func (e *rpcError) Unwrap() []error {
	if e.mark == nil {
		return []error{e.err}
	}
	return []error{e.mark, e.err}
}
