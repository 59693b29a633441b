package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

const (
	latencyShards = 4
	// Latencies are recorded in microseconds, from 1 µs to 60 s, at 2 significant digits
	// (1% precision): about 20 KiB per histogram.
	latencyMinUS  = 1
	latencyMaxUS  = 60_000_000
	latencySigFig = 2
)

// latency is a windowed HDR histogram. hdrhistogram-go is not goroutine-safe, so recordings
// are spread over a few mutex-guarded shards (a recorder takes the first free shard, so
// concurrent requests rarely wait). Each shard keeps two halves of the window; rotate drops
// the older half, so quantiles cover the last half to full window.
type latency struct {
	next   atomic.Uint32
	shards [latencyShards]latencyShard
}

type latencyShard struct {
	mu        sync.Mutex
	cur, prev *hdrhistogram.Histogram
	_         [40]byte // keep shards on separate cache lines
}

func newLatency() *latency {
	l := &latency{}
	for i := range l.shards {
		l.shards[i].cur = newHist()
		l.shards[i].prev = newHist()
	}
	return l
}

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(latencyMinUS, latencyMaxUS, latencySigFig)
}

func (l *latency) record(d time.Duration) {
	us := d.Microseconds()
	if us < latencyMinUS {
		us = latencyMinUS
	} else if us > latencyMaxUS {
		us = latencyMaxUS
	}
	start := l.next.Add(1)
	for i := range uint32(latencyShards) {
		s := &l.shards[(start+i)%latencyShards]
		if s.mu.TryLock() {
			_ = s.cur.RecordValue(us) // in range by construction
			s.mu.Unlock()
			return
		}
	}
	s := &l.shards[start%latencyShards]
	s.mu.Lock()
	_ = s.cur.RecordValue(us)
	s.mu.Unlock()
}

// rotate starts a new half window.
func (l *latency) rotate() {
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		s.prev, s.cur = s.cur, s.prev
		s.cur.Reset()
		s.mu.Unlock()
	}
}

// mergeInto adds the whole window to h.
func (l *latency) mergeInto(h *hdrhistogram.Histogram) {
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		h.Merge(s.cur)
		h.Merge(s.prev)
		s.mu.Unlock()
	}
}

// quantiles of a histogram in milliseconds.
type quantiles struct{ p50, p99, p999, max float64 }

func quantilesOf(h *hdrhistogram.Histogram) quantiles {
	if h.TotalCount() == 0 {
		return quantiles{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return quantiles{
		p50:  ms(h.ValueAtQuantile(50)), // hdrhistogram-go takes percent
		p99:  ms(h.ValueAtQuantile(99)),
		p999: ms(h.ValueAtQuantile(99.9)),
		max:  ms(h.Max()),
	}
}
