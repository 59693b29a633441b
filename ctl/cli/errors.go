package cli

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/ctl/present"
)

// Exit codes of kvctl, mapped in one place (ExitCode).
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
// that no command translated (RPCError) is mapped by its code, as RPCError would.
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
	if s, ok := status.FromError(err); ok {
		return codeExit(s.Code())
	}
	return ExitFailure
}

// codeExit is the one table from a gRPC code to kvctl's exit code: what the cluster calls
// an invalid argument is a usage error; a precondition it refuses (an unsafe change, a
// change in flight, a member that exists) is a refusal; everything else is a failure.
func codeExit(c codes.Code) int {
	switch c {
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
// "not found: node ...: ..." (exit 4), "node 127.0.0.1:9090: unavailable: ..." (exit 1). Every command maps gRPC errors here.
func RPCError(addr string, err error) error {
	s, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("node %s: %w", addr, err)
	}
	switch codeExit(s.Code()) {
	case ExitUsage:
		return UsageErrorf("node %s: %s", addr, s.Message())
	case ExitRefused:
		return RefusedErrorf("node %s: %s", addr, s.Message())
	case ExitNotFound:
		return fmt.Errorf("%w: node %s: %s", ErrNotFound, addr, s.Message())
	}
	return fmt.Errorf("node %s: %s: %s", addr, present.Code(s.Code()), s.Message())
}
