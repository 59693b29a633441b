package cli

import (
	"errors"
	"fmt"
)

// Exit codes of kvctl, mapped in one place (ExitCode).
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
	// ExitRefused: the cluster refused an unsafe operation (see --force).
	ExitRefused = 3
)

var (
	// ErrUsage marks a bad flag or argument.
	ErrUsage = errors.New("usage")
	// ErrRefused marks an operation refused as unsafe.
	ErrRefused = errors.New("refused")
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

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrRefused):
		return ExitRefused
	default:
		return ExitFailure
	}
}
