package admin

import "errors"

// Sentinel errors of this package; wrapped with context, test with errors.Is.
var (
	// ErrUnknownKind: a profile kind other than cpu, heap, allocs, mutex, block, goroutine, trace.
	ErrUnknownKind = errors.New("unknown profile kind")
	// ErrCaptureBusy: a CPU profile or an execution trace is already being captured in this
	// process (the runtime allows one of each at a time).
	ErrCaptureBusy = errors.New("a capture of this kind is already running")
)
