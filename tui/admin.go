package tui

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
)

// AdminConfig configures an AdminSource.
type AdminConfig struct {
	// Seeds are gRPC addresses asked for Status, Ring and WatchChange, in turn until one answers.
	Seeds []string
	// Dial returns an Admin client for addr; it may share connections. Required.
	Dial func(addr string) (kvpb.AdminClient, error)
	// Interval of each node's WatchStats stream (default 500ms).
	Interval time.Duration
	// Retry is the wait before reconnecting a broken stream (default 500ms).
	Retry time.Duration
}

// AdminSource is the Source over the Admin gRPC API: Status and Ring from the first seed that
// answers, one WatchStats stream per known node (nodes learnt from Status every second), each
// reconnecting after Retry, and a WatchChange stream. A node that stops answering simply stops
// producing samples; the console's last-seen deadline turns it DOWN.
type AdminSource struct {
	cfg     AdminConfig
	stats   chan *kvpb.NodeStats
	changes chan *kvpb.ChangeProgress

	mu    sync.Mutex
	known []string // node addresses learnt from Status, tried after the seeds
}

var (
	_ Source = (*AdminSource)(nil)
	_ Runner = (*AdminSource)(nil)
)

// NewAdminSource returns a source on cfg; call Run (tui.Run does) to start its streams.
func NewAdminSource(cfg AdminConfig) *AdminSource {
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 500 * time.Millisecond
	}
	return &AdminSource{cfg: cfg, stats: make(chan *kvpb.NodeStats, 64), changes: make(chan *kvpb.ChangeProgress, 8)}
}

// Stats implements Source.
func (s *AdminSource) Stats() <-chan *kvpb.NodeStats { return s.stats }

// Changes implements Source.
func (s *AdminSource) Changes() <-chan *kvpb.ChangeProgress { return s.changes }

func (s *AdminSource) addrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string(nil), s.cfg.Seeds...)
	for _, a := range s.known {
		dup := false
		for _, b := range out {
			dup = dup || a == b
		}
		if !dup {
			out = append(out, a)
		}
	}
	return out
}

// each calls fn on each address in turn until one succeeds.
func each[T any](ctx context.Context, s *AdminSource, what string, fn func(kvpb.AdminClient) (T, error)) (T, error) {
	var zero T
	var errs []error
	for _, a := range s.addrs() {
		c, err := s.cfg.Dial(a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v, err := fn(c)
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return zero, fmt.Errorf("%s: no node address", what)
	}
	return zero, fmt.Errorf("%s: %w", what, errors.Join(errs...))
}

// Status implements Source.
func (s *AdminSource) Status(ctx context.Context) (*kvpb.StatusResponse, error) {
	return each(ctx, s, "status", func(c kvpb.AdminClient) (*kvpb.StatusResponse, error) {
		return c.Status(ctx, &kvpb.StatusRequest{})
	})
}

// Ring implements Source.
func (s *AdminSource) Ring(ctx context.Context) (*kvpb.RingResponse, error) {
	return each(ctx, s, "ring", func(c kvpb.AdminClient) (*kvpb.RingResponse, error) {
		return c.Ring(ctx, &kvpb.RingRequest{})
	})
}

// Run discovers nodes and keeps their streams until ctx ends, then closes Stats and Changes.
func (s *AdminSource) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		close(s.stats)
		close(s.changes)
	}()
	wg.Go(func() { s.watchChange(ctx) })
	watching := map[string]bool{}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := s.Status(sctx)
		cancel()
		if err == nil {
			var addrs []string
			for _, n := range st.GetNodes() {
				a := n.GetGrpcAddr()
				if a == "" {
					continue
				}
				addrs = append(addrs, a)
				if !watching[a] {
					watching[a] = true
					wg.Go(func() { s.watchStats(ctx, a) })
				}
			}
			s.mu.Lock()
			s.known = addrs
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// watchStats keeps one WatchStats stream to addr; a stream that goes silent (a hung node) is
// dropped after a few intervals.
func (s *AdminSource) watchStats(ctx context.Context, addr string) {
	keepWatching(ctx, s, s.stats, 4*s.cfg.Interval+time.Second, func(ctx context.Context) (watchStream[*kvpb.NodeStats], error) {
		c, err := s.cfg.Dial(addr)
		if err != nil {
			return nil, err
		}
		return c.WatchStats(ctx, &kvpb.StatsRequest{IntervalMs: uint32(s.cfg.Interval.Milliseconds()), Vnodes: true})
	})
}

// watchChange keeps one WatchChange stream to the first node that answers.
func (s *AdminSource) watchChange(ctx context.Context) {
	keepWatching(ctx, s, s.changes, 0, func(ctx context.Context) (watchStream[*kvpb.ChangeProgress], error) {
		return each(ctx, s, "watch change", func(c kvpb.AdminClient) (watchStream[*kvpb.ChangeProgress], error) {
			return c.WatchChange(ctx, &kvpb.ChangeStatusRequest{IntervalMs: 1000})
		})
	})
}

// watchStream is an Admin watch stream of T.
type watchStream[T any] interface{ Recv() (T, error) }

// keepWatching is the console's one watch loop: it opens a stream, passes what it receives
// to out, and opens it again Retry after it ends (ten times Retry when the node lacks the
// RPC), until ctx ends. silence > 0 drops a stream that sends nothing for that long.
func keepWatching[T any](ctx context.Context, s *AdminSource, out chan<- T, silence time.Duration, open func(context.Context) (watchStream[T], error)) {
	for ctx.Err() == nil {
		err := func() error {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st, err := open(ctx)
			if err != nil {
				return err
			}
			for {
				var timer *time.Timer
				if silence > 0 {
					timer = time.AfterFunc(silence, cancel)
				}
				v, err := st.Recv()
				if timer != nil {
					timer.Stop()
				}
				if err != nil {
					return err
				}
				select {
				case out <- v:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}()
		if status.Code(err) == codes.Unimplemented {
			s.wait(ctx, 10*s.cfg.Retry)
			continue
		}
		s.wait(ctx, s.cfg.Retry)
	}
}

func (s *AdminSource) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
