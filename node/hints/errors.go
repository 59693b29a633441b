package hints

import "errors"

var (
	// ErrInvalidConfig is returned by Open for a bad Config, and by Add for a peer name
	// that does not fit a key.
	ErrInvalidConfig = errors.New("invalid hints config")
	// ErrClosed is returned by operations on a closed Log.
	ErrClosed = errors.New("hints closed")
)
