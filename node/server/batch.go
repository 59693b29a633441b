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
	out := &results{wake: make(chan struct{}, 1), done: make(chan struct{})}
	sent := make(chan error, 1)
	go func() { sent <- out.run(srv) }()

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
var errStopping = status.Error(codes.Unavailable, "replica batch: node stopping")

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
			res.Result = statusResult(status.Error(codes.DeadlineExceeded, "batch item: deadline passed before it was sent"))
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
	st := status.Convert(GRPCError(err))
	b, merr := proto.Marshal(st.Proto())
	if merr != nil {
		b, _ = proto.Marshal(status.New(codes.Internal, "batch result: "+merr.Error()).Proto())
	}
	return &kvpb.BatchResult_Status{Status: b}
}

// results gathers a Batch stream's finished items and sends them: whatever finished while the
// previous response was on the wire goes in the next one.
type results struct {
	mu    sync.Mutex
	queue []*kvpb.BatchResult
	wake  chan struct{} // a result is queued
	done  chan struct{} // closed once no more results will be pushed
}

func (r *results) push(res *kvpb.BatchResult) {
	r.mu.Lock()
	r.queue = append(r.queue, res)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run sends until done is closed and the queue is empty, or a send fails (the stream is
// broken: the items still running end with the stream's context).
func (r *results) run(srv kvpb.Replica_BatchServer) error {
	var spare []*kvpb.BatchResult
	resp := &kvpb.BatchResponse{}
	for {
		select {
		case <-r.wake:
		case <-r.done:
		}
		r.mu.Lock()
		batch := r.queue
		r.queue, spare = spare[:0], nil // spare is batch's again only once it is sent
		r.mu.Unlock()
		if len(batch) == 0 {
			spare = batch
			select {
			case <-r.done:
				return nil
			default:
				continue
			}
		}
		resp.Results = batch
		err := srv.Send(resp)
		clear(batch)
		spare = batch
		if err != nil {
			return err // push never blocks; the items still running end with the stream
		}
	}
}
