package server

import (
	"context"
	"time"

	"ringkv/proto/rpcerr"
)

// watchGap is the least time between two messages of a watch stream that a change woke: an
// operation whose parts finish fast (ranges of a repair, moves of a ring change) sends at
// most one message per gap, not one per part.
const watchGap = 100 * time.Millisecond

// watchLoop is the Admin watch streams' one loop (WatchStats, WatchChange, WatchRepair). It
// sends next() at once, then every interval (0: a second) and when changed() fires, at most
// once per watchGap then, until over(p) says the message sent was the last (the operation's
// final state), the client goes away (nil) or the node drains (Unavailable, so that the
// client asks another node). changed is called before each next, so that a change between
// the two is not missed; a nil changed, or one that returns nil, wakes on the interval only.
// over nil: the stream lasts as long as the client.
func watchLoop[P any](ctx context.Context, draining <-chan struct{}, interval time.Duration,
	changed func() <-chan struct{}, next func() P, send func(P) error, over func(P) bool) error {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var wake <-chan struct{}
		if changed != nil {
			wake = changed()
		}
		p := next()
		if err := send(p); err != nil {
			return err
		}
		if over != nil && over(p) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-draining:
			return rpcerr.Encode(ErrShuttingDown)
		case <-wake:
			select {
			case <-time.After(watchGap):
			case <-ctx.Done():
				return nil
			}
		case <-t.C:
		}
	}
}
