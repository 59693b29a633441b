package metrics

import "errors"

// Sentinel errors of this package; wrapped with context, test with errors.Is.
var (
	// ErrInvalidConfig: Config.Validate failed.
	ErrInvalidConfig = errors.New("invalid metrics config")
)
