package repair

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"ringkv/proto/kvpb"
)

// Run repairs this node's primary ranges every Interval (±10%) until ctx ends, skipping a
// round while a ring change is in flight or a session runs; then it stops the running
// session and waits for it. Without an Interval it only waits.
func (s *Service) Run(ctx context.Context) error {
	defer func() {
		s.cancel()
		s.wg.Wait()
	}()
	if s.cfg.Interval <= 0 {
		<-ctx.Done()
		return nil
	}
	for {
		jitter := time.Duration((rand.Float64()*0.2 - 0.1) * float64(s.cfg.Interval))
		t := time.NewTimer(s.cfg.Interval + jitter)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if v := s.cfg.View(); v == nil || v.Changing() || s.Running() {
			continue
		}
		req := &kvpb.RepairRequest{RateBytes: s.cfg.BackgroundRate}
		if _, err := s.start(ctx, req, true); err != nil && !errors.Is(err, ErrRunning) {
			s.cfg.Logger.Info("background repair skipped", "err", err)
		}
	}
}
