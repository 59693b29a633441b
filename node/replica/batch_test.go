package replica

import (
	"context"
	"testing"

	"ringkv/proto/kvpb"
)

// TestHeldCallNotPooled: a call whose context ended just as its result came (the context's
// AfterFunc had started, so stop reports false) is completed once, by its result, and does
// not go back to the pool: abandon still reads it, and a new request taking it from the pool
// would reset what abandon reads, or be failed with the old context's error.
func TestHeldCallNotPooled(t *testing.T) {
	b := newBatcher(nil, nil)
	defer b.cancel()
	ctx, cancel := context.WithCancel(context.Background())
	c := b.get(ctx)
	fins := 0
	c.fin = func(c *call) { fins++; b.put(c) }
	started, release, abandoned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	c.stop = context.AfterFunc(ctx, func() {
		close(started)
		<-release
		b.abandon(c, ctx)
		close(abandoned)
	})
	cancel()
	<-started // the AfterFunc runs; abandon has not taken b.mu yet

	c.res = &kvpb.BatchResult{}
	b.mu.Lock()
	fired := b.complete(c, nil)
	b.mu.Unlock()
	finish(fired)
	close(release)
	<-abandoned

	if fins != 1 {
		t.Fatalf("fin ran %d times, want once (by the result)", fins)
	}
	if c.err != nil {
		t.Fatalf("got error %v on a call completed by its result", c.err)
	}
	for range 64 {
		if b.get(context.Background()) == c {
			t.Fatal("a call that abandon could still read went back to the pool")
		}
	}
}
