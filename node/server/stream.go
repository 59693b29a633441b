package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"

	"ringkv/node/cluster"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

// ErrChecksum: a streamed chunk did not match its checksum (after the retries).
var ErrChecksum = errors.New("range chunk checksum mismatch")

// errChunkFull stops a StreamRange scan when its chunk is full; the next chunk is read by a
// new scan resumed after the last key.
var errChunkFull = errors.New("chunk full")

func isChunkFull(err error) bool { return errors.Is(err, errChunkFull) }

// checksumRetries is how often RangeClient re-pulls a range from its last good key after a
// chunk failed its checksum.
const checksumRetries = 3

// RangeClient pulls token ranges from other nodes over Replica.StreamRange: the mover's
// cluster.RangeSource. It verifies every chunk (ChunkChecksum) and, on a mismatch, pulls the
// range again from the last good key. It throttles on the receiving side with one byte budget
// shared by all of its concurrent pulls (one RangeClient per node: a per-receiver rate), reading
// the rate after every chunk so that a rate changed while ranges stream takes effect at once.
// Safe for concurrent use.
type RangeClient struct {
	// Conn returns the connection to a member's gRPC address (with the cluster secret).
	Conn func(addr string) (grpc.ClientConnInterface, error)
	// View is this node's ring view, sent with every request (its epoch, and the change in
	// flight, for which the source fences: ReplicaDeps.Fence); nil sends neither.
	View func() ring.ViewID
	// Rate, when set, returns the current throttle in bytes per second (0 = none); it
	// overrides the rate a pull started with.
	Rate func() uint64
	// Sleep waits d or until ctx ends; nil = a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Latency, when set, returns the recent tail latency of this node's client-facing work
	// (a p99 over the last second or so). The pulls then pace themselves by it: below
	// LatencyTarget their rate grows step by step, above it the rate halves (additive
	// increase, multiplicative decrease), never above Rate. nil: Rate alone.
	Latency func() time.Duration
	// LatencyTarget is the latency the adaptive pace holds; 0 = twice the latency seen when
	// the pulls began (after a pause of adaptIdle without pulls).
	//
	// This pace is the receiver's: it protects the clients of the node that pulls. Those of
	// the sources are protected by the sources' own pace (ReplicaDeps.Latency); a stream
	// goes at the slower of the two.
	LatencyTarget time.Duration

	lim limiter
	ad  adaptive
}

var _ cluster.RangeSource = (*RangeClient)(nil)

// StreamRange implements cluster.RangeSource. fn gets one chunk's records at a time; the
// batch and its keys and values are not used by RangeClient after fn returns.
func (c *RangeClient) StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, rateBytes uint64,
	fn func(batch []store.Entry) error) error {
	conn, err := c.Conn(source.Addr)
	if err != nil {
		return fmt.Errorf("stream range from %s: %w", source.ID, err)
	}
	rc := kvpb.NewReplicaClient(conn)
	rate := func() uint64 {
		r := rateBytes
		if c.Rate != nil {
			r = c.Rate()
		}
		if c.Latency != nil {
			return c.ad.rate(r, c.Latency(), c.LatencyTarget, time.Now())
		}
		return r
	}
	resume := resumeAfter
	for attempt := 0; ; attempt++ {
		err := c.pull(ctx, rc, start, end, &resume, rate, fn)
		if !errors.Is(err, ErrChecksum) || attempt >= checksumRetries {
			if err != nil {
				return fmt.Errorf("stream range (%d, %d] from %s: %w", start, end, source.ID, err)
			}
			return nil
		}
	}
}

// pull runs one StreamRange call, advancing *resume past every batch handed to fn.
func (c *RangeClient) pull(ctx context.Context, rc kvpb.ReplicaClient, start, end uint64, resume *[]byte, rate func() uint64,
	fn func(batch []store.Entry) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := &kvpb.StreamRangeRequest{Start: start, End: end, ResumeAfter: *resume}
	if c.View != nil {
		vid := c.View()
		req.Epoch = vid.Epoch
		if vid.InFlight {
			req.ChangeId = vid.Change
		}
	}
	s, err := rc.StreamRange(ctx, req)
	if err != nil {
		return replica.FromStatus(err)
	}
	// The next chunk is received, verified and decoded while fn applies this one: receiving
	// and applying overlap instead of taking turns (one chunk ahead at most).
	chunks := make(chan received, 1)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred later, so run first) has ended the stream
	defer cancel()
	wg.Go(func() { receive(ctx, s, chunks) })
	for {
		var r received
		select {
		case r = <-chunks:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err != nil {
			return r.err
		}
		if len(r.batch) > 0 {
			if err := fn(r.batch); err != nil {
				return err
			}
			last := r.batch[len(r.batch)-1]
			*resume = store.StoreKey(last.Token, last.Key)
		}
		// Every chunk pays, the last one too: a range of one chunk is common (many small moves).
		if err := c.lim.wait(ctx, r.bytes, rate, c.Sleep); err != nil {
			return err
		}
		if r.last {
			return nil
		}
	}
}

// received is one chunk of a stream, verified and decoded, or the error that ended it.
type received struct {
	batch []store.Entry
	bytes int // key + value bytes
	last  bool
	err   error
}

// receive reads s into out until the last chunk, an error (sent as the last item) or ctx's end.
func receive(ctx context.Context, s grpc.ServerStreamingClient[kvpb.RangeChunk], out chan<- received) {
	for {
		var r received
		chunk, err := s.Recv()
		switch {
		case err == io.EOF:
			r.err = fmt.Errorf("stream ended without its last chunk: %w", replica.ErrReplicaUnavailable)
		case err != nil:
			r.err = replica.FromStatus(err)
		default:
			if got := ChunkChecksum(chunk.GetRecords()); got != chunk.GetChecksum() {
				r.err = fmt.Errorf("%w: got %x, want %x", ErrChecksum, got, chunk.GetChecksum())
				break
			}
			r.last = chunk.GetLast()
			r.batch = make([]store.Entry, 0, len(chunk.GetRecords()))
			for _, kr := range chunk.GetRecords() {
				rec := replica.RecordFromProto(kr.GetRecord())
				r.batch = append(r.batch, store.Entry{Token: ring.Token(kr.GetKey()), Key: kr.GetKey(), Record: rec})
				r.bytes += len(kr.GetKey()) + len(rec.Value)
			}
		}
		select {
		case out <- r:
		case <-ctx.Done():
			return
		}
		if r.err != nil || r.last {
			return
		}
	}
}

// limiter paces streams together to a byte rate: a RangeClient's pulls (the receiver's
// budget) or a Replica's streams paced by its latency (the source's). Each chunk books its
// bytes at the rate after those booked before it (by any stream), and its stream sleeps until
// its booking ends. A changed rate reprices what is booked and not yet paid for: halving the
// rate doubles the waits left, lifting it (0) ends them.
type limiter struct {
	mu   sync.Mutex
	rate uint64
	next time.Time // when the bytes booked so far have been paid for
}

// limiterSlice bounds one sleep, so that a stream notices a changed rate soon.
const limiterSlice = 250 * time.Millisecond

func (l *limiter) book(n int, rate uint64, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rate != l.rate {
		l.next = now.Add(repriced(l.next.Sub(now), l.rate, rate))
		l.rate = rate
	}
	if l.next.Before(now) {
		l.next = now
	}
	if rate == 0 {
		return 0
	}
	l.next = l.next.Add(time.Duration(float64(n) / float64(rate) * float64(time.Second)))
	return l.next.Sub(now)
}

// repriced is a wait of d booked at rate from, at rate to instead (0 = no wait).
func repriced(d time.Duration, from, to uint64) time.Duration {
	if d <= 0 || from == 0 || to == 0 {
		return 0
	}
	return time.Duration(float64(d) * float64(from) / float64(to))
}

// wait books n bytes and sleeps until they are paid for, repriced when the rate changes.
func (l *limiter) wait(ctx context.Context, n int, rate func() uint64, sleep func(ctx context.Context, d time.Duration) error) error {
	r := rate()
	d := l.book(n, r, time.Now())
	for d > 0 {
		step := min(d, limiterSlice)
		if sleep != nil {
			if err := sleep(ctx, step); err != nil {
				return err
			}
		} else {
			tm := time.NewTimer(step)
			select {
			case <-ctx.Done():
				tm.Stop()
				return ctx.Err()
			case <-tm.C:
			}
		}
		d -= step
		if r2 := rate(); r2 != r {
			d, r = repriced(d, r, r2), r2
		}
	}
	return nil
}

// The adaptive pace (RangeClient.Latency, ReplicaDeps.Latency): it starts at adaptStart,
// adds adaptStep every adaptEvery while the latency stays at or under the target, halves when
// above it, and stays within [adaptMin, the operator's rate or adaptMax].
const (
	adaptStart = 8 << 20
	adaptStep  = 4 << 20
	adaptMin   = 1 << 20
	adaptMax   = 256 << 20
	adaptEvery = 100 * time.Millisecond
	adaptIdle  = 10 * time.Second
)

// adaptive is the AIMD state of the streams one node paces together by its latency: a
// RangeClient's pulls, or the streams a Replica serves.
type adaptive struct {
	mu       sync.Mutex
	cur      uint64 // bytes per second; 0 before the first pull
	target   time.Duration
	adjusted time.Time
	used     time.Time // last call
}

// rate returns the pace now given the operator's limit (0 = none) and the latency seen.
func (a *adaptive) rate(limit uint64, lat, target time.Duration, now time.Time) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == 0 || now.Sub(a.used) > adaptIdle {
		// A new run of pulls: start low, and take the latency before them as the baseline.
		a.cur, a.adjusted, a.target = adaptStart, now, target
		if a.target <= 0 {
			a.target = 2 * max(lat, time.Millisecond)
		}
	}
	a.used = now
	if now.Sub(a.adjusted) >= adaptEvery {
		a.adjusted = now
		if lat > a.target {
			a.cur = max(a.cur/2, adaptMin)
		} else {
			a.cur = min(a.cur+adaptStep, adaptMax)
		}
	}
	if limit > 0 && a.cur > limit {
		a.cur = max(limit, adaptMin)
		return limit
	}
	return a.cur
}
