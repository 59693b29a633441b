// Package stream moves token ranges between nodes for a ring change: RangeClient, the
// mover's cluster.RangeSource, pulls ranges over Replica.StreamRange and verifies every chunk
// (ChunkChecksum); Limiter and Adaptive are the byte pacing that the receiver's pulls and a
// source's streams (node/server's StreamRange) each share.
package stream

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
	"ringkv/proto/rpcerr"
)

// ErrChecksum: a streamed chunk did not match its checksum (after the retries).
var ErrChecksum = rpcerr.New(kvpb.Reason_REASON_CHECKSUM, "range chunk checksum mismatch")

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
	// flight, for which the source fences: server.ReplicaDeps.Fence); nil sends neither.
	View func() ring.ViewID
	// Rate, when set, returns the current throttle in bytes per second (0 = none); it
	// overrides the rate a pull started with.
	Rate func() uint64
	// Sleep waits d or until ctx ends; nil = a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Latency, when set, returns the recent tail latency of this node's client-facing work
	// (a p99 over the last AdaptWindow or so). The pulls then pace themselves by it
	// (Adaptive: slow start, then additive increase, multiplicative decrease), never above
	// Rate. nil: Rate alone.
	Latency func() time.Duration
	// CPUWait, when set with Latency, returns the p99 of this node's goroutines' wait to run
	// over about the last AdaptWindow (Signals.CPUWait).
	CPUWait func() time.Duration
	// LatencyTarget is the latency the Adaptive pace holds; 0 = AdaptTargetFactor times the
	// latency before the pulls began (Baseline).
	//
	// This pace is the receiver's: it protects the clients of the node that pulls. Those of
	// the sources are protected by the sources' own pace (server.ReplicaDeps.Latency); a stream
	// goes at the slower of the two.
	LatencyTarget time.Duration
	// Baseline, when set and LatencyTarget is 0, is the node's latency before the pulls (a
	// Baseline's Median): the target is twice it.
	Baseline func() time.Duration

	lim Limiter
	ad  Adaptive
}

var _ cluster.RangeSource = (*RangeClient)(nil)

// Pace is the state of the pulls' pace by Latency (the zero PaceState without Latency, or
// before the first pull).
func (c *RangeClient) Pace() PaceState { return c.ad.State() }

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
			return c.ad.Rate(r, ReadSignals(c.Latency, c.CPUWait), Target(c.LatencyTarget, c.Baseline), time.Now())
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
		if err := c.lim.Wait(ctx, r.bytes, rate, c.Sleep); err != nil {
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
