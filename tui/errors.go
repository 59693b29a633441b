package tui

import "errors"

// ErrNotAvailable is returned by an action whose implementation has not landed yet.
var ErrNotAvailable = errors.New("not available yet")

// ErrReadonly is returned when an action is attempted in a readonly console.
var ErrReadonly = errors.New("console is readonly")
