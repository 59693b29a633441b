package repair

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"ringkv/proto/kvpb"
)

// Run follows the journal (continuing this node's sessions, taking over those of a
// coordinator that stays down) and repairs this node's primary ranges every Interval (±10%),
// skipping a round while a ring change is in flight, repair is paused or a session runs,
// until ctx ends; then it stops the running session (left in flight in the journal, for
// the restarted node to continue) and waits for it.
func (s *Service) Run(ctx context.Context) error {
	defer func() {
		s.cancel()
		s.wg.Wait()
	}()
	var bg sync.WaitGroup
	defer bg.Wait()
	if s.cfg.Interval > 0 {
		bg.Go(func() { s.background(ctx) })
	}
	s.follow(ctx)
	return nil
}

func (s *Service) background(ctx context.Context) {
	for {
		jitter := time.Duration((rand.Float64()*0.2 - 0.1) * float64(s.cfg.Interval))
		t := time.NewTimer(s.cfg.Interval + jitter)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if v := s.cfg.View(); v == nil || v.Changing() || s.Running() || s.isPaused() {
			continue
		}
		req := &kvpb.RepairRequest{RateBytes: s.cfg.BackgroundRate}
		if _, err := s.start(ctx, req, true); err != nil && !errors.Is(err, ErrRunning) {
			s.cfg.Logger.Info("background repair skipped", "err", err)
		}
	}
}
