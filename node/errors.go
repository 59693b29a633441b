package node

import "errors"

var (
	// ErrInvalidConfig is returned by Config.Validate and New for a bad Config.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrClosed is returned by Close on a node already closed.
	ErrClosed = errors.New("node closed")
)
