package stream

import (
	"context"
	"slices"
	"sync"
	"time"
)

// BaselineSamples is how many one-second latency samples a Baseline keeps.
const BaselineSamples = 10

// Baseline is a node's "latency before": the median of its latency sampled once a second over
// the last BaselineSamples seconds. The auto target of the Adaptive pace follows it: one
// second's p99 at the moment the streams begin may be a spike (on a loaded machine one in
// ten seconds is several times the others), and a target above a spike holds nothing. The
// zero Baseline is ready; it is safe for concurrent use.
type Baseline struct {
	mu      sync.Mutex
	samples [BaselineSamples]time.Duration
	next    int
	n       int
}

// Observe adds one second's latency; 0 (no requests that second) is skipped.
func (b *Baseline) Observe(lat time.Duration) {
	if lat <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.samples[b.next] = lat
	b.next = (b.next + 1) % BaselineSamples
	b.n = min(b.n+1, BaselineSamples)
}

// Median is the median of the samples kept, 0 without any.
func (b *Baseline) Median() time.Duration {
	b.mu.Lock()
	s := slices.Clone(b.samples[:b.n])
	b.mu.Unlock()
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	return s[len(s)/2]
}

// Run observes lat() every interval until ctx ends.
func (b *Baseline) Run(ctx context.Context, interval time.Duration, lat func() time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.Observe(lat())
		}
	}
}

// Target is the target the Adaptive pace is given: the operator's (target > 0), else
// AdaptTargetFactor times the baseline when there is one, else 0 (the Adaptive then takes
// that factor times the latency it sees first).
func Target(target time.Duration, baseline func() time.Duration) time.Duration {
	if target > 0 || baseline == nil {
		return target
	}
	return time.Duration(AdaptTargetFactor * float64(baseline()))
}
