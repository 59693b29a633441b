package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

// BatchQueue bounds the requests waiting for one peer's batch stream; a request past it fails
// at once with ResourceExhausted (a failure, not evidence of death, for the peer's breaker).
const BatchQueue = 8192

// noBatchRetry is how long a Remote whose peer answered Batch with Unimplemented (an older
// node) uses the unary calls before it tries the stream again.
const noBatchRetry = time.Minute

// The sender's wait for a fuller batch (after TiKV client-go's batch client, which waits up
// to maxBatchWaitTime for batchWaitSize requests only while the load is above its
// overloadThreshold): while at least waitInFlight requests are in flight on the stream, the
// peer is busy and the replies are far off anyway, so the sender holds a batch of fewer than
// waitBatch items back for more, at most a tenth of the recent round trip and never more than
// maxBatchWait. Below that nothing waits: at low load a request goes out at once.
const (
	waitInFlight = 16
	waitBatch    = 32
	maxBatchWait = 200 * time.Microsecond
)

// errNoBatch: the peer does not serve Batch; the request goes by the unary call.
var errNoBatch = errors.New("peer does not serve batch")

// batcher sends one peer's reads and writes over one long-lived Replica.Batch stream.
//
// A caller queues its request and waits for its own result or its context's end, whichever
// comes first (a result that arrives later is dropped). One sender goroutine per peer takes
// whatever queued while its previous message was on the wire and sends it as one
// BatchRequest: at low load a batch is one request, sent at once; under load requests share
// messages without any added wait. One receiver goroutine per stream hands each result to its
// caller by id. When the stream breaks, the requests sent on it fail with Unavailable (as a
// unary call to a peer that went away does) and the next request opens a new stream.
//
// The sender starts with the first request and ends when the stream has broken and nothing is
// queued; Close ends both goroutines and waits for them.
type batcher struct {
	client kvpb.ReplicaClient
	counts *BatchCounts // nil: not counted
	pool   sync.Pool    // *call

	base   context.Context // parent of every stream; cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	queue   []*call
	wake    chan struct{} // something was queued; capacity 1
	running bool          // the sender goroutine is running
	st      *bstream      // the open stream; nil when none
	sending bool          // a Send on st is under way; its sender owns req and items
	req     kvpb.BatchRequest
	items   []*kvpb.BatchItem
	nextID  uint64
	rtt     time.Duration // moving average of the round trips (send to result)
	noBatch time.Time     // when the peer last answered Unimplemented
	closed  bool
}

// bstream is one Batch stream.
type bstream struct {
	cs     kvpb.Replica_BatchClient
	cancel context.CancelFunc
	done   chan struct{} // closed once broken

	// Guarded by batcher.mu.
	pending map[uint64]*call
	broken  bool
	fail    error // what broke it, as its calls in flight fail
}

// call is one request through a batcher. The item and the request messages live in it, so
// that a call taken from the pool costs no allocation to build.
type call struct {
	item  kvpb.BatchItem
	read  kvpb.BatchItem_Read
	write kvpb.BatchItem_Write
	rreq  kvpb.ReadRequest
	wreq  kvpb.WriteRequest
	rec   kvpb.Record

	deadline time.Time
	sent     time.Time // set by the sender before the send
	res      *kvpb.BatchResult
	err      error
	done     chan struct{} // receives once when res or err is set; capacity 1

	abandoned bool // guarded by batcher.mu: its caller has gone
	// held: its context's AfterFunc had started when the call completed (finish), so that
	// abandon may still read it; such a call does not go back to the pool, where a new
	// request would reset what abandon reads (and could be failed with the old context's
	// error).
	held bool

	// An asynchronous call (start) completes by fin, run once, instead of done: by the
	// receiver with its result, by whoever fails it, or when its context ends (stop
	// unregisters that). completed is guarded by batcher.mu.
	fin       func(*call)
	stop      func() bool
	completed bool
	onWrite   func(applied bool, err error) // the caller's callback, for fin
	onRead    func(rec store.Record, found bool, err error)
}

func newBatcher(client kvpb.ReplicaClient, counts *BatchCounts) *batcher {
	b := &batcher{client: client, counts: counts, wake: make(chan struct{}, 1)}
	b.pool.New = func() any { return &call{done: make(chan struct{}, 1)} }
	b.base, b.cancel = context.WithCancel(context.Background())
	return b
}

// get returns a call from the pool for a request whose context is ctx.
func (b *batcher) get(ctx context.Context) *call {
	c := b.pool.Get().(*call)
	c.deadline, _ = ctx.Deadline()
	c.res, c.err, c.abandoned, c.completed, c.held = nil, nil, false, false, false
	c.fin, c.stop, c.onWrite, c.onRead = nil, nil, nil, nil
	return c
}

// put returns a call to the pool. Only a call that got its result may go back: until then
// the sender may still be marshaling it.
func (b *batcher) put(c *call) {
	if c.held {
		return
	}
	c.res, c.fin, c.stop, c.onWrite, c.onRead = nil, nil, nil, nil, nil
	c.rreq.Key, c.wreq.Key, c.rec.Value = nil, nil, nil
	b.pool.Put(c)
}

// enqueue queues c and gets it on its way (queued, when given, runs under b.mu just before c
// is queued); it refuses a closed batcher, one that fell back to unary calls (errNoBatch: nothing was
// queued, send c by the unary call) and a full queue.
func (b *batcher) enqueue(c *call, queued func()) error {
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return status.Error(codes.Unavailable, "replica batch: closed")
	case !b.noBatch.IsZero() && time.Since(b.noBatch) < noBatchRetry:
		b.mu.Unlock()
		return errNoBatch
	case len(b.queue) >= BatchQueue:
		b.mu.Unlock()
		return status.Error(codes.ResourceExhausted, "replica batch: queue full")
	}
	if queued != nil {
		queued()
	}
	b.queue = append(b.queue, c)
	if st := b.st; st != nil && !st.broken && !b.sending && len(st.pending) < waitInFlight {
		// Nothing on the wire: the caller sends (its request and whatever else queued)
		// itself, without waking the sender goroutine: no hop at low load.
		b.send(st)
	}
	if len(b.queue) > 0 && !b.running {
		b.running = true
		b.wg.Add(1)
		go b.run()
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return nil
}

// do sends c and waits for its result (c.res) or error. On errNoBatch the request was not
// served: send it by the unary call.
func (b *batcher) do(ctx context.Context, c *call) error {
	if err := b.enqueue(c, nil); err != nil {
		return err
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		b.mu.Lock()
		c.abandoned = true
		b.mu.Unlock()
		// The result, if it comes, goes to a call no one reads; the call is not pooled again.
		return status.FromContextError(ctx.Err()).Err()
	}
}

// start queues c, an asynchronous call: c.fin runs once with its result (c.res) or error
// (c.err), in the goroutine that completes it — the stream's receiver, the sender, or one of
// its own when ctx ends first. No goroutine waits for it. On errNoBatch nothing was queued and
// fin will not run: send it by the unary call.
func (b *batcher) start(ctx context.Context, c *call) error {
	return b.enqueue(c, func() { c.stop = context.AfterFunc(ctx, func() { b.abandon(c, ctx) }) })
}

// abandon completes the asynchronous call c with its context's error, unless it completed.
func (b *batcher) abandon(c *call, ctx context.Context) {
	b.mu.Lock()
	if c.completed {
		b.mu.Unlock()
		return
	}
	c.completed, c.abandoned = true, true
	b.mu.Unlock()
	// The result, if it comes, goes to a call no one reads; the call is not pooled again.
	c.err = status.FromContextError(ctx.Err()).Err()
	c.fin(c)
}

// complete hands c its outcome (c.res or c.err, set by the caller): a waiting call is woken,
// an asynchronous one is added to fired, whose fins the caller runs (finish) once b.mu is
// released. b.mu is held; c is not abandoned.
func (b *batcher) complete(c *call, fired []*call) []*call {
	if c.fin == nil {
		c.done <- struct{}{}
		return fired
	}
	c.completed = true
	return append(fired, c)
}

// finish runs the fins of fired calls (see complete), without b.mu.
func finish(fired []*call) {
	for _, c := range fired {
		c.held = !c.stop()
		c.fin(c)
	}
}

// run is the sender goroutine (see batcher): it opens the stream, and sends what queued
// while a Send was under way.
func (b *batcher) run() {
	defer b.wg.Done()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for (len(b.queue) == 0 || b.sending) && !b.closed {
			if len(b.queue) == 0 && (b.st == nil || b.st.broken) {
				b.running = false
				return
			}
			var broken <-chan struct{}
			if b.st != nil {
				broken = b.st.done
			}
			b.mu.Unlock()
			select {
			case <-b.wake:
			case <-broken:
			case <-b.base.Done():
			}
			b.mu.Lock()
		}
		if b.closed {
			b.failQueue(status.Error(codes.Unavailable, "replica batch: closed"))
			b.running = false
			return
		}
		if b.st == nil || b.st.broken {
			b.st = nil
			if !b.noBatch.IsZero() && time.Since(b.noBatch) < noBatchRetry {
				b.failQueue(errNoBatch)
				continue
			}
			b.mu.Unlock()
			s, err := b.open()
			b.mu.Lock()
			if err != nil {
				b.failQueue(status.Convert(err).Err())
				continue
			}
			if s.broken {
				// Refused before a request went out (a wrong secret, a stopping peer): the
				// queue fails with its error rather than reopening in a loop.
				b.failQueue(s.fail)
				continue
			}
			b.st = s
		}
		b.fill()
		if b.closed {
			continue
		}
		if b.st != nil && !b.st.broken && !b.sending {
			b.send(b.st)
		}
	}
}

// fill holds a small batch back for more while the stream is busy (see waitInFlight). b.mu
// is held; it is released while waiting.
func (b *batcher) fill() {
	st := b.st
	if st == nil || len(st.pending) < waitInFlight || len(b.queue) >= waitBatch {
		return
	}
	wait := min(b.rtt/10, maxBatchWait)
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for len(b.queue) < waitBatch && !st.broken && !b.closed {
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-t.C:
			b.mu.Lock()
			return
		case <-st.done:
		case <-b.base.Done():
		}
		b.mu.Lock()
	}
}

// send sends everything queued on st as one BatchRequest. b.mu is held, and no Send is under
// way; it is released during the Send and held again on return. When more queued meanwhile,
// the sender goroutine is woken for it.
func (b *batcher) send(st *bstream) {
	now := time.Now()
	for _, c := range b.queue {
		if c.abandoned {
			continue
		}
		if !c.deadline.IsZero() {
			left := c.deadline.Sub(now)
			if left <= 0 {
				continue // its caller is returning DeadlineExceeded
			}
			c.item.TimeoutNanos = int64(left)
		} else {
			c.item.TimeoutNanos = 0
		}
		b.nextID++
		c.item.Id = b.nextID
		c.sent = now
		st.pending[c.item.Id] = c
		b.items = append(b.items, &c.item)
	}
	clear(b.queue)
	b.queue = b.queue[:0]
	if len(b.items) == 0 {
		return
	}
	b.sending = true
	b.req.Items = b.items
	b.counts.add(len(b.items))
	b.mu.Unlock()
	if err := st.cs.Send(&b.req); err != nil {
		// The stream is broken; its receiver fails the calls in flight on it.
		st.cancel()
	}
	b.mu.Lock()
	clear(b.items)
	b.items = b.items[:0]
	b.sending = false
	if len(b.queue) > 0 {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// failQueue fails every queued call with err. b.mu is held; it is released while the
// asynchronous calls' fins run.
func (b *batcher) failQueue(err error) {
	var fired []*call
	for _, c := range b.queue {
		if !c.abandoned {
			c.err = err
			fired = b.complete(c, fired)
		}
	}
	clear(b.queue)
	b.queue = b.queue[:0]
	if len(fired) > 0 {
		b.mu.Unlock()
		finish(fired)
		b.mu.Lock()
	}
}

// open starts a stream and its receiver.
func (b *batcher) open() (*bstream, error) {
	ctx, cancel := context.WithCancel(b.base)
	cs, err := b.client.Batch(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("open batch stream: %w", err)
	}
	st := &bstream{cs: cs, cancel: cancel, done: make(chan struct{}), pending: map[uint64]*call{}}
	b.wg.Add(1)
	go b.recv(st)
	return st, nil
}

// recv is a stream's receiver goroutine: it hands results to their calls until the stream
// breaks, then fails the calls still in flight on it.
func (b *batcher) recv(st *bstream) {
	defer b.wg.Done()
	var fired []*call
	for {
		resp, err := st.cs.Recv()
		if err != nil {
			b.broke(st, err)
			return
		}
		b.mu.Lock()
		for _, r := range resp.GetResults() {
			c, ok := st.pending[r.GetId()]
			if !ok {
				continue
			}
			delete(st.pending, r.GetId())
			if c.abandoned {
				continue
			}
			b.rtt += (time.Since(c.sent) - b.rtt) / 16
			c.res = r
			fired = b.complete(c, fired)
		}
		b.mu.Unlock()
		finish(fired)
		clear(fired)
		fired = fired[:0]
	}
}

// broke marks st broken and fails its calls in flight: with errNoBatch when the peer does not
// serve Batch (none of them was served), else with Unavailable.
func (b *batcher) broke(st *bstream, err error) {
	st.cancel()
	var fail error
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		fail = err // a refusal, as the unary call gets it
	default:
		fail = status.Error(codes.Unavailable, fmt.Sprintf("replica batch stream broken: %v", err))
	}
	b.mu.Lock()
	if status.Code(err) == codes.Unimplemented {
		b.noBatch = time.Now()
		fail = errNoBatch
	}
	st.broken, st.fail = true, fail
	if b.st == st {
		b.st = nil
	}
	var fired []*call
	for id, c := range st.pending {
		delete(st.pending, id)
		if !c.abandoned {
			c.err = fail
			fired = b.complete(c, fired)
		}
	}
	b.mu.Unlock()
	finish(fired)
	close(st.done)
}

// close ends the streams, fails what is queued or in flight with Unavailable and waits for
// the goroutines.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
	b.mu.Lock()
	b.failQueue(status.Error(codes.Unavailable, "replica batch: closed"))
	b.mu.Unlock()
}

// resultError is the error of a result that carries a status (nil when it carries none).
func resultError(r *kvpb.BatchResult) error {
	raw, ok := r.GetResult().(*kvpb.BatchResult_Status)
	if !ok {
		return nil
	}
	var sp spb.Status
	if err := proto.Unmarshal(raw.Status, &sp); err != nil {
		return status.Error(codes.Internal, fmt.Sprintf("batch result status: %v", err))
	}
	if sp.GetCode() == int32(codes.OK) {
		return status.Error(codes.Internal, "batch result: status OK without a response")
	}
	return status.ErrorProto(&sp)
}
