package tui

import "errors"

// ErrNotAvailable is returned by an action the console was not given (no bench, no profile
// capture) or that the node does not implement (gRPC Unimplemented).
var ErrNotAvailable = errors.New("not available")

// ErrReadonly is returned when an action is attempted in a readonly console.
var ErrReadonly = errors.New("console is readonly")
