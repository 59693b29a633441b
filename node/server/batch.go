package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// Batch serves the Reads and Writes of one long-lived stream (see kv.proto). The stream was
// authorized once, when it opened, by the interceptors' rule for the Replica service (cluster
// secret, or members and loopback only).
//
// Over a store that applies many writes at once (batchWriter: replica.Local), no item gets a
// goroutine: the stream's receiver serves each message's reads as it reads them, and hands its
// writes to the apply loop (this handler's goroutine), which takes every write that queued
// meanwhile and applies them in one group commit (replica.Local.WriteMany). A read never waits
// for a commit; a write waits for the commit ahead of it, as it would in the store anyway. An
// item whose deadline passed before its commit fails with DeadlineExceeded unapplied.
//
// Over any other replica each item runs in its own goroutine (batchEach).
//
// Results go back as soon as they are ready, gathered with whatever else finished while the
// previous response was on the wire.
func (s *Replica) Batch(srv kvpb.Replica_BatchServer) error {
	select {
	case <-s.d.Stopping:
		return errStopping
	default:
	}
	out := &results{srv: srv, wake: make(chan struct{}, 1), done: make(chan struct{})}
	sent := make(chan error, 1)
	go func() { sent <- out.run() }()
	bw, ok := s.d.Local.(batchWriter)
	if !ok {
		return s.batchEach(srv, out, sent)
	}
	return s.batchApply(srv, bw, out, sent)
}

// batchWriter is a replica that applies many writes in one store commit (replica.Local).
// WriteMany is safe for concurrent use and sets each item's outcome.
type batchWriter interface {
	WriteMany(ctx context.Context, items []replica.WriteItem)
}

// maxApply bounds the writes the apply loop takes into one WriteMany.
const maxApply = 512

// queuedWrite is a write item of a Batch stream on its way to the apply loop.
type queuedWrite struct {
	id       uint64
	key      []byte
	rec      store.Record
	vid      ring.ViewID
	op       replica.Op
	start    time.Time
	deadline time.Time // zero: none
	late     bool      // its deadline passed before its commit: not applied
}

// batchApply is Batch over a batchWriter (see Batch).
func (s *Replica) batchApply(srv kvpb.Replica_BatchServer, bw batchWriter, out *results, sent <-chan error) error {
	ctx := srv.Context()
	writes := make(chan []queuedWrite, 64)
	var (
		mu      sync.Mutex
		stopped bool // no more messages start
		busy    sync.WaitGroup
	)
	recvErr := make(chan error, 1)
	go func() { // the receiver: it ends when the stream does, at the latest when this handler returns
		var res []*kvpb.BatchResult
		for {
			req, err := srv.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			mu.Lock()
			if stopped {
				mu.Unlock()
				return // never started: the sender fails them as in flight on a broken stream
			}
			busy.Add(1)
			mu.Unlock()
			var ws []queuedWrite
			now := time.Now()
			for _, it := range req.GetItems() {
				op, ok := it.GetOp().(*kvpb.BatchItem_Write)
				if !ok || it.GetTimeoutNanos() < 0 {
					res = append(res, s.serveItem(ctx, it)) // reads, and what fails at once
					continue
				}
				w, err := s.queueWrite(it.GetId(), op.Write, now, it.GetTimeoutNanos())
				if err != nil {
					res = append(res, &kvpb.BatchResult{Id: it.GetId(), Result: statusResult(err)})
					continue
				}
				ws = append(ws, w)
			}
			if len(res) > 0 {
				out.push(res...)
				clear(res)
				res = res[:0]
			}
			if len(ws) > 0 {
				writes <- ws // the apply loop drains writes until busy is done
			}
			busy.Done()
		}
	}()

	var batch []queuedWrite
	var items []replica.WriteItem
	var res []*kvpb.BatchResult
	apply := func(first []queuedWrite) {
		batch = append(batch[:0], first...)
	more:
		for len(batch) < maxApply {
			select {
			case ws := <-writes:
				batch = append(batch, ws...)
			default:
				break more
			}
		}
		now := time.Now()
		items = items[:0]
		for i := range batch {
			w := &batch[i]
			if !w.deadline.IsZero() && now.After(w.deadline) {
				err := fmt.Errorf("batch item: deadline passed before its commit: %w", context.DeadlineExceeded)
				s.observe(w.op, w.start, err)
				res = append(res, &kvpb.BatchResult{Id: w.id, Result: statusResult(err)})
				w.late = true
				continue
			}
			items = append(items, replica.WriteItem{Key: w.key, Rec: w.rec, View: w.vid})
		}
		if len(items) > 0 {
			bw.WriteMany(ctx, items)
		}
		j := 0
		for i := range batch {
			w := &batch[i]
			if w.late {
				continue
			}
			it := &items[j]
			j++
			resp, err := s.wrote(w.rec, it.Applied, it.Err)
			s.observe(w.op, w.start, err)
			r := &kvpb.BatchResult{Id: w.id}
			if err != nil {
				r.Result = statusResult(err)
			} else {
				r.Result = &kvpb.BatchResult_Write{Write: resp}
			}
			res = append(res, r)
		}
		clear(batch)
		clear(items)
		out.push(res...)
		clear(res)
		res = res[:0]
	}

	var err error
loop:
	for {
		select {
		case ws := <-writes:
			apply(ws)
		case err = <-recvErr:
			break loop
		case <-s.d.Stopping:
			err = errStopping
			break loop
		}
	}
	mu.Lock()
	stopped = true
	mu.Unlock()
	// Apply what the receiver has begun, until it is idle.
	idle := make(chan struct{})
	go func() { busy.Wait(); close(idle) }()
	for done := false; !done; {
		select {
		case ws := <-writes:
			apply(ws)
		case <-idle:
			done = true
		}
	}
	for {
		select {
		case ws := <-writes:
			apply(ws)
			continue
		default:
		}
		break
	}
	close(out.done)
	serr := <-sent
	if errors.Is(err, io.EOF) {
		return serr // the sender closed its side: answer what it sent, then end
	}
	return err
}

// queueWrite checks a write item of a Batch stream received at now, as the unary Write
// does, for the apply loop. An item with a timeout is due by now + timeout.
func (s *Replica) queueWrite(id uint64, req *kvpb.WriteRequest, now time.Time, timeout int64) (queuedWrite, error) {
	op, err := s.validWrite(req)
	if err != nil {
		return queuedWrite{}, err
	}
	rec, vid, err := s.checkWrite(req)
	if err != nil {
		s.observe(op, now, err)
		return queuedWrite{}, err
	}
	w := queuedWrite{id: id, key: req.GetKey(), rec: rec, vid: vid, op: op, start: now}
	if timeout > 0 {
		w.deadline = now.Add(time.Duration(timeout))
	}
	return w, nil
}

// batchEach is Batch over a replica that writes one item at a time: each item runs in its own
// goroutine with its own deadline, through the same code as the unary Read and Write, so one
// that blocks holds no other.
func (s *Replica) batchEach(srv kvpb.Replica_BatchServer, out *results, sent <-chan error) error {
	ctx := srv.Context()
	// The receiver: it ends when the stream does, at the latest when this handler returns.
	var (
		mu      sync.Mutex
		stopped bool // no more items start
		items   sync.WaitGroup
	)
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := srv.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			mu.Lock()
			if stopped {
				mu.Unlock()
				return // never started: the sender fails them as in flight on a broken stream
			}
			items.Add(len(req.GetItems()))
			mu.Unlock()
			for _, it := range req.GetItems() {
				go func() {
					defer items.Done()
					out.push(s.serveItem(ctx, it))
				}()
			}
		}
	}()
	var err error
	select {
	case err = <-recvErr:
	case <-s.d.Stopping:
		err = errStopping
	}
	mu.Lock()
	stopped = true
	mu.Unlock()
	items.Wait()
	close(out.done)
	serr := <-sent
	if errors.Is(err, io.EOF) {
		return serr // the sender closed its side: answer what it sent, then end
	}
	return err
}

// errStopping ends the Batch streams of a node whose gRPC server is stopping.
var errStopping = rpcerr.Encode(fmt.Errorf("replica batch: %w", ErrShuttingDown))

// serveItem runs one item through the unary handler of its kind.
func (s *Replica) serveItem(ctx context.Context, it *kvpb.BatchItem) (res *kvpb.BatchResult) {
	res = &kvpb.BatchResult{Id: it.GetId()}
	defer func() {
		if p := recover(); p != nil {
			res.Result = statusResult(status.Error(codes.Internal, "internal error"))
		}
	}()
	if t := it.GetTimeoutNanos(); t != 0 {
		if t < 0 {
			res.Result = statusResult(fmt.Errorf("batch item: deadline passed before it was sent: %w", context.DeadlineExceeded))
			return res
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t))
		defer cancel()
	}
	switch op := it.GetOp().(type) {
	case *kvpb.BatchItem_Read:
		resp, err := s.Read(ctx, op.Read)
		if err != nil {
			res.Result = statusResult(err)
		} else {
			res.Result = &kvpb.BatchResult_Read{Read: resp}
		}
	case *kvpb.BatchItem_Write:
		resp, err := s.Write(ctx, op.Write)
		if err != nil {
			res.Result = statusResult(err)
		} else {
			res.Result = &kvpb.BatchResult_Write{Write: resp}
		}
	default:
		res.Result = statusResult(fmt.Errorf("%w: batch item without a request", replica.ErrInvalidArgument))
	}
	return res
}

// statusResult is err's gRPC status, serialized, as a BatchResult.
func statusResult(err error) *kvpb.BatchResult_Status {
	st := status.Convert(rpcerr.Encode(err))
	b, merr := proto.Marshal(st.Proto())
	if merr != nil {
		b, _ = proto.Marshal(status.New(codes.Internal, "batch result: "+merr.Error()).Proto())
	}
	return &kvpb.BatchResult_Status{Status: b}
}

// results gathers a Batch stream's finished items and sends them. An item that finishes while
// nothing is on the wire sends itself (with whatever else finished), in its own goroutine: no
// hop at low load; what finishes while a Send is under way goes in the next one, sent by the
// run goroutine.
type results struct {
	srv  kvpb.Replica_BatchServer
	wake chan struct{} // a result is queued; capacity 1
	done chan struct{} // closed once no more results will be pushed

	mu      sync.Mutex
	queue   []*kvpb.BatchResult
	spare   []*kvpb.BatchResult
	sending bool // a Send is under way; its sender owns resp
	resp    kvpb.BatchResponse
	err     error // of the first failed Send: the stream is broken, results are dropped
}

func (r *results) push(res ...*kvpb.BatchResult) {
	if len(res) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return // the items still running end with the stream
	}
	r.queue = append(r.queue, res...)
	if !r.sending {
		r.send()
	}
}

// send sends the queue. r.mu is held and no Send is under way; it is released during the Send.
func (r *results) send() {
	batch := r.queue
	r.queue, r.spare = r.spare[:0], nil // spare is batch's again once it is sent
	r.sending = true
	r.resp.Results = batch
	r.mu.Unlock()
	err := r.srv.Send(&r.resp)
	r.mu.Lock()
	clear(batch)
	r.spare = batch[:0]
	r.sending = false
	if err != nil && r.err == nil {
		r.err = err
	}
	if len(r.queue) > 0 {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// run sends what queued while a Send was under way, until done is closed and nothing is left;
// it returns the error of the first failed Send.
func (r *results) run() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for len(r.queue) == 0 || r.sending {
			select {
			case <-r.done:
				if len(r.queue) == 0 && !r.sending {
					return r.err
				}
			default:
			}
			r.mu.Unlock()
			select {
			case <-r.wake:
			case <-r.done:
			}
			r.mu.Lock()
		}
		if r.err != nil {
			clear(r.queue)
			r.queue = r.queue[:0]
			continue
		}
		r.send()
	}
}
