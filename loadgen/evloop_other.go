//go:build !linux

package loadgen

import (
	"context"
	"sync/atomic"
	"time"
)

// runClosedLoops reports false: the event loops (evloop_linux.go) are Linux-only, and Run
// falls back to a goroutine per worker.
func (t *HTTPTarget) runClosedLoops(ctx context.Context, workers []*worker, next *atomic.Int64, measureFrom, end time.Time) bool {
	return false
}
