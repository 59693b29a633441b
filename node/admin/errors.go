package admin

import (
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// Sentinel errors of this package; wrapped with context, test with errors.Is.
var (
	// ErrUnknownKind: a profile kind other than cpu, heap, allocs, mutex, block, goroutine, trace.
	ErrUnknownKind = rpcerr.New(kvpb.Reason_REASON_UNKNOWN_KIND, "unknown profile kind")
	// ErrCaptureBusy: a CPU profile or an execution trace is already being captured in this
	// process (the runtime allows one of each at a time).
	ErrCaptureBusy = rpcerr.New(kvpb.Reason_REASON_CAPTURE_BUSY, "a capture of this kind is already running")
)
