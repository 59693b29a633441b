package server

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// checksumRetries is how often RangeClient re-pulls a range from its last good key after a
// chunk failed its checksum.
const checksumRetries = 3

// RangeClient pulls token ranges from other nodes over Replica.StreamRange: the mover's
// cluster.RangeSource. It verifies every chunk (ChunkChecksum) and, on a mismatch, pulls the
// range again from the last good key. It throttles on the receiving side, reading the rate
// before every chunk so that a rate changed while a range streams takes effect at once.
// Safe for concurrent use.
type RangeClient struct {
	// Conn returns the connection to a member's gRPC address (with the cluster secret).
	Conn func(addr string) (grpc.ClientConnInterface, error)
	// Epoch is this node's ring epoch, sent with every request; nil sends 0.
	Epoch func() uint64
	// Rate, when set, returns the current throttle in bytes per second (0 = none); it
	// overrides the rate a pull started with.
	Rate func() uint64
	// Sleep waits d or until ctx ends; nil = a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

var _ cluster.RangeSource = (*RangeClient)(nil)

// StreamRange implements cluster.RangeSource.
func (c *RangeClient) StreamRange(ctx context.Context, source ring.Member, start, end uint64, resumeAfter []byte, rateBytes uint64,
	fn func(token uint64, key []byte, rec store.Record) error) error {
	conn, err := c.Conn(source.Addr)
	if err != nil {
		return fmt.Errorf("stream range from %s: %w", source.ID, err)
	}
	rc := kvpb.NewReplicaClient(conn)
	th := throttle{start: time.Now(), sleep: c.Sleep}
	resume := resumeAfter
	for attempt := 0; ; attempt++ {
		err := c.pull(ctx, rc, start, end, &resume, func() uint64 {
			if c.Rate != nil {
				return c.Rate()
			}
			return rateBytes
		}, &th, fn)
		if !errors.Is(err, ErrChecksum) || attempt >= checksumRetries {
			if err != nil {
				return fmt.Errorf("stream range (%d, %d] from %s: %w", start, end, source.ID, err)
			}
			return nil
		}
	}
}

// pull runs one StreamRange call, advancing *resume past every record handed to fn.
func (c *RangeClient) pull(ctx context.Context, rc kvpb.ReplicaClient, start, end uint64, resume *[]byte, rate func() uint64,
	th *throttle, fn func(token uint64, key []byte, rec store.Record) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var epoch uint64
	if c.Epoch != nil {
		epoch = c.Epoch()
	}
	s, err := rc.StreamRange(ctx, &kvpb.StreamRangeRequest{Start: start, End: end, Epoch: epoch, ResumeAfter: *resume})
	if err != nil {
		return replica.FromStatus(err)
	}
	for {
		chunk, err := s.Recv()
		if err == io.EOF {
			return fmt.Errorf("stream ended without its last chunk: %w", replica.ErrReplicaUnavailable)
		}
		if err != nil {
			return replica.FromStatus(err)
		}
		if got := ChunkChecksum(chunk.GetRecords()); got != chunk.GetChecksum() {
			return fmt.Errorf("%w: got %x, want %x", ErrChecksum, got, chunk.GetChecksum())
		}
		n := 0
		for _, kr := range chunk.GetRecords() {
			tok := ring.Token(kr.GetKey())
			rec := replica.RecordFromProto(kr.GetRecord())
			if err := fn(tok, kr.GetKey(), rec); err != nil {
				return err
			}
			*resume = store.StoreKey(tok, kr.GetKey())
			n += len(kr.GetKey()) + len(rec.Value)
		}
		if chunk.GetLast() {
			return nil
		}
		if err := th.wait(ctx, n, rate()); err != nil {
			return err
		}
	}
}

// throttle paces a stream to a byte rate: after each chunk it sleeps until the bytes so far
// fit the rate. A changed rate restarts the accounting.
type throttle struct {
	start time.Time
	rate  uint64
	bytes uint64
	sleep func(ctx context.Context, d time.Duration) error
}

func (t *throttle) wait(ctx context.Context, n int, rate uint64) error {
	if rate != t.rate {
		t.start, t.rate, t.bytes = time.Now(), rate, 0
	}
	if rate == 0 {
		return nil
	}
	t.bytes += uint64(n)
	due := t.start.Add(time.Duration(float64(t.bytes) / float64(rate) * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	if t.sleep != nil {
		return t.sleep(ctx, d)
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
