package loadgen

import (
	"context"
	"sync"
	"time"

	"ringkv/proto/kvpb"
)

// LiveWindow is how many of the last seconds a live chart shows.
const LiveWindow = 120

// Live runs a load that shows itself while it runs: every second it is given (OnInterval)
// and every event of the cluster (Follow) are kept for Chart. The console's background
// bench runs through it. Safe for concurrent use: Run from one goroutine, Chart from any.
type Live struct {
	mu      sync.Mutex
	start   time.Time
	seconds []SecondJSON
	events  *EventLog
}

// Run runs cfg against t as Run does, following the cluster through admin (nil: no events;
// a cluster that refuses admin calls gives a run without events). It replaces what an
// earlier Run of l kept.
func (l *Live) Run(ctx context.Context, cfg Config, t Target, admin kvpb.AdminClient) (*Result, error) {
	events := NewEventLog(nil)
	l.mu.Lock()
	l.start, l.seconds, l.events = time.Now().Add(cfg.Warmup), nil, events
	start := l.start.Add(-cfg.Warmup)
	l.mu.Unlock()
	stop := func() {}
	if admin != nil {
		if s, err := Follow(ctx, admin, events); err == nil {
			stop = s
		}
	}
	defer stop()
	next := cfg.OnInterval
	cfg.OnInterval = func(iv Interval) {
		if next != nil {
			next(iv)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.seconds = append(l.seconds, secondsJSON(start, l.start, []Interval{iv})...)
		if n := len(l.seconds); n > LiveWindow {
			l.seconds = append(l.seconds[:0], l.seconds[n-LiveWindow:]...)
		}
	}
	return Run(ctx, cfg, t)
}

// Chart draws the last LiveWindow seconds and their events within width × height; "" until
// two seconds have passed.
func (l *Live) Chart(width, height int) string {
	l.mu.Lock()
	secs := append([]SecondJSON(nil), l.seconds...)
	start, events := l.start, l.events
	l.mu.Unlock()
	if len(secs) < 2 || events == nil {
		return ""
	}
	var shown []EventJSON
	for _, e := range eventsJSON(start, events.Events()) {
		if e.AtS > secs[0].AtS-1 {
			shown = append(shown, e)
		}
	}
	return ChartIn(secs, shown, width, height)
}
