package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
)

// busyChanges is a change in flight whose state changes all the time: its Watch channel is
// always closed. Only Watch and Progress are called by WatchChange.
type busyChanges struct{ Changes }

func (busyChanges) Watch() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

func (busyChanges) Progress(context.Context) *kvpb.ChangeProgress {
	return &kvpb.ChangeProgress{Id: 1, State: kvpb.ChangeState_CHANGE_STATE_STREAMING}
}

// countingStream is a WatchChange server stream that counts what it is sent.
type countingStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent atomic.Int64
}

func (s *countingStream) Context() context.Context { return s.ctx }

func (s *countingStream) Send(*kvpb.ChangeProgress) error {
	s.sent.Add(1)
	return nil
}

// TestWatchCoalesces: a watch stream woken by every change of a busy operation sends at most
// one message per watchGap, as WatchRepair always did, and ends with Unavailable when the
// node drains.
func TestWatchCoalesces(t *testing.T) {
	draining := make(chan struct{})
	a := NewAdmin(AdminDeps{Changes: busyChanges{}, Draining: draining})
	const window = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	st := &countingStream{ctx: ctx}
	if err := a.WatchChange(&kvpb.ChangeStatusRequest{IntervalMs: 1000}, st); err != nil {
		t.Fatalf("WatchChange: %v", err)
	}
	// One at once, then one per watchGap: 6 in the window; 12 leaves room for a slow machine.
	if got, most := st.sent.Load(), int64(2*(window/watchGap+1)); got > most {
		t.Errorf("got %d messages in %s, want at most %d (one per %s)", got, window, most, watchGap)
	}

	close(draining)
	st = &countingStream{ctx: context.Background()}
	if err := a.WatchChange(&kvpb.ChangeStatusRequest{}, st); status.Code(err) != codes.Unavailable {
		t.Errorf("WatchChange while draining: got %v, want Unavailable", err)
	}
}
