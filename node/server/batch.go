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
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// Batch serves the Reads and Writes of one long-lived stream (see kv.proto). The stream was
// authorized once, when it opened, by the interceptors' rule for the Replica service (cluster
// secret, or members and loopback only). Each item runs in its own goroutine with its own
// deadline, through the same code as the unary Read and Write, so one that blocks (a stripe
// lock in the store, a slow disk) holds no other; its result goes back as soon as it is done,
// gathered with whatever else finished while the previous response was on the wire.
func (s *Replica) Batch(srv kvpb.Replica_BatchServer) error {
	select {
	case <-s.d.Stopping:
		return errStopping
	default:
	}
	ctx := srv.Context()
	out := &results{srv: srv, wake: make(chan struct{}, 1), done: make(chan struct{})}
	sent := make(chan error, 1)
	go func() { sent <- out.run() }()

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

func (r *results) push(res *kvpb.BatchResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return // the items still running end with the stream
	}
	r.queue = append(r.queue, res)
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
