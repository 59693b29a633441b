package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"ringkv/proto/kvpb"
)

// paceRate is the pace a source's streams are at now (ReplicaDeps.Latency).
func paceRate(r *Replica) uint64 {
	r.ad.mu.Lock()
	defer r.ad.mu.Unlock()
	return r.ad.cur
}

// chunkSize is the bytes of a chunk as the source books them (key + value + 16 per record).
func chunkSize(c *kvpb.RangeChunk) int {
	n := 0
	for _, kr := range c.GetRecords() {
		n += len(kr.GetKey()) + len(kr.GetRecord().GetValue()) + 16
	}
	return n
}

// A source that paces by its own latency slows its stream while the latency is above the
// target, down to the floor, and speeds it up again once the latency is below. Timings are
// checked only with wide margins: only a stream that does not slow down, or does not speed
// up again at all, fails.
func TestStreamRangeSourcePacesByLatency(t *testing.T) {
	src := openStreamStore(t)
	fillStore(t, src, 16_000, 1024) // ~16 MiB: ~31 chunks of chunkRecords
	var lat atomic.Int64
	lat.Store(int64(50 * time.Millisecond))
	r, conn := serveReplicaDeps(t, ReplicaDeps{
		Store:         src,
		Latency:       func() time.Duration { return time.Duration(lat.Load()) },
		LatencyTarget: 5 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// No rate in the request: the latency alone paces the stream.
	s, err := kvpb.NewReplicaClient(conn).StreamRange(ctx, &kvpb.StreamRangeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	recv := func() (int, bool) {
		t.Helper()
		c, err := s.Recv()
		if err != nil {
			t.Fatalf("recv chunk %d: %v", chunks, err)
		}
		chunks++
		return chunkSize(c), c.GetLast()
	}

	// Above the target the pace halves every adaptEvery down to the floor: a few chunks.
	for paceRate(r) != adaptMin {
		if _, last := recv(); last {
			t.Fatalf("the whole range streamed (%d chunks) and the pace is %d B/s, want the floor %d", chunks, paceRate(r), adaptMin)
		}
	}
	recv() // the chunk booked while the pace came down
	const slowChunks = 3
	start, slowBytes := time.Now(), 0
	for range slowChunks {
		n, last := recv()
		if last {
			t.Fatalf("range ended after %d chunks, want more than %d at the floor", chunks, slowChunks)
		}
		slowBytes += n
	}
	slow := float64(slowBytes) / time.Since(start).Seconds()
	if slow > 2*adaptMin {
		t.Errorf("above the target: got %.2f MiB/s, want at most 2 × the floor %.2f MiB/s", slow/(1<<20), float64(adaptMin)/(1<<20))
	}

	// Below the target the pace grows adaptStep every adaptEvery; the rest of the range, over
	// ten times what was streamed at the floor, comes several times faster.
	lat.Store(int64(time.Millisecond))
	start, fastBytes := time.Now(), 0
	for {
		n, last := recv()
		fastBytes += n
		if last {
			break
		}
	}
	fast := float64(fastBytes) / time.Since(start).Seconds()
	if fast < 4*slow {
		t.Errorf("below the target: got %.2f MiB/s, want at least 4 × the %.2f MiB/s above it", fast/(1<<20), slow/(1<<20))
	}
	if got := paceRate(r); got <= adaptStart {
		t.Errorf("pace after the range: got %d B/s, want above the start %d", got, adaptStart)
	}
	t.Logf("above the target %.2f MiB/s, below it %.2f MiB/s (%d chunks)", slow/(1<<20), fast/(1<<20), chunks)
}

// The source's pace is one budget for all of its streams, and never above the change's rate
// (ReplicaDeps.Rate) even while its latency stays under the target.
func TestStreamRangeSourcePaceIsPerSourceWithinRate(t *testing.T) {
	src := openStreamStore(t)
	total := fillStore(t, src, 12_000, 1024)
	const rate = 4 << 20
	_, conn := serveReplicaDeps(t, ReplicaDeps{
		Store:         src,
		Latency:       func() time.Duration { return time.Millisecond },
		LatencyTarget: time.Second,
		Rate:          func() uint64 { return rate },
	})
	// The receiver does not throttle: the source alone paces.
	rc := &RangeClient{Conn: func(string) (grpc.ClientConnInterface, error) { return conn, nil }}
	// Each stream's first chunk goes unbooked (4 of ~24); per-stream pacing would reach 4×.
	pullQuartersWithin(t, rc, total, rate)
}

// A changed rate reprices the wait booked and not yet paid for, instead of forgiving it.
func TestLimiterReprices(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name     string
		from, to uint64
		at       time.Duration // when the second chunk is booked, after the first
		want     time.Duration // its wait: what is left of the first, repriced, and its own
	}{
		{"same rate", mib, mib, 0, 2 * time.Second},
		{"doubled", mib, 2 * mib, 0, time.Second},
		{"halved", 2 * mib, mib, 0, 2 * time.Second},
		{"quartered, half paid", 4 * mib, mib, 125 * time.Millisecond, 1500 * time.Millisecond},
		{"doubled, half paid", mib, 2 * mib, 500 * time.Millisecond, 750 * time.Millisecond},
		{"lifted", mib, 0, 0, 0},
		{"from none", 0, mib, 0, time.Second},
		{"all paid", mib, 2 * mib, 3 * time.Second, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l limiter
			now := time.Unix(1000, 0)
			l.book(mib, tc.from, now)
			if got := l.book(mib, tc.to, now.Add(tc.at)); got != tc.want {
				t.Errorf("got a wait of %s, want %s", got, tc.want)
			}
		})
	}
}
