package replica

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// Remote is a peer's Replica service as a Replica. Safe for concurrent use.
// Every request carries the sender's ring epoch; the receiver's epoch in
// each response goes to the OnEpoch callback, if any.
type Remote struct {
	client  kvpb.ReplicaClient
	cc      grpcConn // nil when conn cannot report its state
	epoch   func() uint64
	onEpoch func(uint64)
	onClock func(sent, received, remote time.Time)
	batch   *batcher // nil: unary calls only (Unary)
	unary   bool
	counts  *BatchCounts // nil: not counted

	finWriteFn func(*call) // r.finWrite, bound once
	finReadFn  func(*call) // r.finRead, bound once
}

var (
	_ Replica     = (*Remote)(nil)
	_ asyncWriter = (*Remote)(nil)
	_ asyncReader = (*Remote)(nil)
)

// RemoteOption configures a Remote.
type RemoteOption func(*Remote)

// OnClock makes a Remote call fn with the replica's wall clock from every
// response that carries one, and when the request was sent and the response
// received, for a clock-offset estimate (hlc.Monitor.Observe). fn must be safe
// for concurrent use and must not block.
func OnClock(fn func(sent, received, remote time.Time)) RemoteOption {
	return func(r *Remote) { r.onClock = fn }
}

// OnEpoch makes a Remote call fn with the receiver's ring epoch from every
// response, so a node can notice that it is behind. fn must be safe for
// concurrent use and must not block.
func OnEpoch(fn func(uint64)) RemoteOption {
	return func(r *Remote) { r.onEpoch = fn }
}

// BatchCounts counts the batch messages Remotes sent and the reads and writes they carried.
// Safe for concurrent use; the zero value is ready.
type BatchCounts struct {
	messages, items atomic.Uint64
}

// Load returns the messages sent and the items they carried so far.
func (b *BatchCounts) Load() (messages, items uint64) {
	return b.messages.Load(), b.items.Load()
}

func (b *BatchCounts) add(items int) {
	if b != nil {
		b.messages.Add(1)
		b.items.Add(uint64(items))
	}
}

// CountBatches makes a Remote count its batch messages in b (shared by a node's Remotes).
func CountBatches(b *BatchCounts) RemoteOption {
	return func(r *Remote) { r.counts = b }
}

// Unary makes a Remote send every request by its own unary call instead of a batch stream.
func Unary() RemoteOption {
	return func(r *Remote) { r.unary = true }
}

// NewRemote returns the Replica service behind conn. Its reads and writes travel in batches
// over one Replica.Batch stream (see batcher), or by the unary calls with Unary or while the
// peer does not serve Batch. Close stops the stream. epoch returns this
// node's current ring epoch; nil sends 0.
func NewRemote(conn grpc.ClientConnInterface, epoch func() uint64, opts ...RemoteOption) *Remote {
	r := &Remote{client: kvpb.NewReplicaClient(conn), epoch: epoch}
	r.cc, _ = conn.(grpcConn)
	r.finWriteFn, r.finReadFn = r.finWrite, r.finRead
	for _, o := range opts {
		o(r)
	}
	if !r.unary {
		r.batch = newBatcher(r.client, r.counts)
	}
	return r
}

// Close ends r's batch stream: requests queued or in flight on it fail with Unavailable, later
// ones go by the unary calls. The connection stays open (its owner closes it).
func (r *Remote) Close() {
	if r.batch != nil {
		r.batch.close()
	}
}

func (r *Remote) myEpoch() uint64 {
	if r.epoch == nil {
		return 0
	}
	return r.epoch()
}

func (r *Remote) sawClock(sent time.Time, wallNanos int64) {
	if r.onClock != nil && wallNanos != 0 {
		r.onClock(sent, time.Now(), time.Unix(0, wallNanos))
	}
}

func (r *Remote) sawEpoch(e uint64) {
	if r.onEpoch != nil {
		r.onEpoch(e)
	}
}

// Read calls Replica.Read, in a batch when the peer serves Batch.
func (r *Remote) Read(ctx context.Context, key []byte) (store.Record, bool, error) {
	r.await(ctx)
	if r.batch != nil {
		rec, found, err := r.batchRead(ctx, key)
		if !errors.Is(err, errNoBatch) {
			return rec, found, err
		}
	}
	return r.readUnary(ctx, &kvpb.ReadRequest{Key: key, Epoch: r.myEpoch()})
}

// readUnary sends one read by the unary Replica.Read.
func (r *Remote) readUnary(ctx context.Context, req *kvpb.ReadRequest) (store.Record, bool, error) {
	sent := time.Now()
	resp, err := r.client.Read(ctx, req)
	if err != nil {
		return store.Record{}, false, fmt.Errorf("remote read: %w", FromStatus(err))
	}
	r.sawEpoch(resp.GetEpoch())
	r.sawClock(sent, resp.GetWallNanos())
	if !resp.GetFound() {
		return store.Record{}, false, nil
	}
	return RecordFromProto(resp.GetRecord()), true, nil
}

// Write calls Replica.Write, in a batch when the peer serves Batch.
func (r *Remote) Write(ctx context.Context, key []byte, rec store.Record, vid ring.ViewID) (bool, error) {
	r.await(ctx)
	if r.batch != nil {
		applied, err := r.batchWrite(ctx, key, rec, vid)
		if !errors.Is(err, errNoBatch) {
			return applied, err
		}
	}
	return r.writeUnary(ctx, &kvpb.WriteRequest{Key: key, Record: RecordToProto(rec), Epoch: vid.Epoch, ChangeId: vid.Change, ChangeInFlight: vid.InFlight})
}

// writeUnary sends one write by the unary Replica.Write.
func (r *Remote) writeUnary(ctx context.Context, req *kvpb.WriteRequest) (bool, error) {
	sent := time.Now()
	resp, err := r.client.Write(ctx, req)
	if err != nil {
		return false, fmt.Errorf("remote write: %w", FromStatus(err))
	}
	r.sawEpoch(resp.GetEpoch())
	r.sawClock(sent, resp.GetWallNanos())
	return resp.GetApplied(), nil
}

// WriteAsync sends a write like Write and returns at once: done runs once with its outcome,
// in the goroutine of the batch stream that completes it (it must not block), or when ctx
// ends (or, when the peer turns out not to serve Batch, in a goroutine that sends it by the
// unary call). False when the write cannot go asynchronously (the connection is not ready, or the
// peer does not serve Batch): then done never runs; call Write instead.
func (r *Remote) WriteAsync(ctx context.Context, key []byte, rec store.Record, vid ring.ViewID, done func(applied bool, err error)) bool {
	if r.batch == nil || (r.cc != nil && r.cc.GetState() != connectivity.Ready) {
		return false
	}
	c := r.batch.get(ctx)
	c.rec.Timestamp, c.rec.Tombstone, c.rec.Value = rec.TS, rec.Tombstone, rec.Value
	c.wreq.Key, c.wreq.Record = key, &c.rec
	c.wreq.Epoch, c.wreq.ChangeId, c.wreq.ChangeInFlight = vid.Epoch, vid.Change, vid.InFlight
	c.write.Write = &c.wreq
	c.item.Op = &c.write
	c.fin, c.onWrite = r.finWriteFn, done
	if err := r.batch.start(ctx, c); err != nil {
		if errors.Is(err, errNoBatch) {
			return false
		}
		r.batch.put(c)
		done(false, fmt.Errorf("remote write: %w", FromStatus(err)))
	}
	return true
}

// finWrite completes an asynchronous write (WriteAsync).
func (r *Remote) finWrite(c *call) {
	done := c.onWrite
	if errors.Is(c.err, errNoBatch) {
		// The peer turned out not to serve Batch (found when the stream opened): nothing was
		// served, so the write goes by the unary call, as Write's does, off the goroutine
		// that completes calls. c is not pooled: it is read here once more.
		req := &kvpb.WriteRequest{Key: c.wreq.Key, Record: &kvpb.Record{Timestamp: c.rec.Timestamp, Tombstone: c.rec.Tombstone, Value: c.rec.Value},
			Epoch: c.wreq.Epoch, ChangeId: c.wreq.ChangeId, ChangeInFlight: c.wreq.ChangeInFlight}
		unaryAfter(c.deadline, func(ctx context.Context) { done(r.writeUnary(ctx, req)) })
		return
	}
	if c.err != nil {
		done(false, fmt.Errorf("remote write: %w", FromStatus(c.err)))
		return // not pooled: an abandoned call may still be in flight
	}
	applied, err := r.wroteBatch(c)
	r.batch.put(c)
	done(applied, err)
}

// wroteBatch is the outcome of a batched write that got its result.
func (r *Remote) wroteBatch(c *call) (bool, error) {
	if err := resultError(c.res); err != nil {
		return false, fmt.Errorf("remote write: %w", FromStatus(err))
	}
	resp := c.res.GetWrite()
	if resp == nil {
		return false, fmt.Errorf("remote write: %w", status.Error(codes.Internal, "batch result without a write response"))
	}
	r.sawEpoch(resp.GetEpoch())
	r.sawClock(c.sent, resp.GetWallNanos())
	return resp.GetApplied(), nil
}

// ReadAsync sends a read like Read and returns at once: done runs once with its outcome, as
// WriteAsync's does. False when the read cannot go asynchronously: call Read instead.
func (r *Remote) ReadAsync(ctx context.Context, key []byte, done func(rec store.Record, found bool, err error)) bool {
	if r.batch == nil || (r.cc != nil && r.cc.GetState() != connectivity.Ready) {
		return false
	}
	c := r.batch.get(ctx)
	c.rreq.Key, c.rreq.Epoch = key, r.myEpoch()
	c.read.Read = &c.rreq
	c.item.Op = &c.read
	c.fin, c.onRead = r.finReadFn, done
	if err := r.batch.start(ctx, c); err != nil {
		if errors.Is(err, errNoBatch) {
			return false
		}
		r.batch.put(c)
		done(store.Record{}, false, fmt.Errorf("remote read: %w", FromStatus(err)))
	}
	return true
}

// finRead completes an asynchronous read (ReadAsync).
func (r *Remote) finRead(c *call) {
	done := c.onRead
	if errors.Is(c.err, errNoBatch) {
		// As finWrite: the read goes by the unary call.
		req := &kvpb.ReadRequest{Key: c.rreq.Key, Epoch: c.rreq.Epoch}
		unaryAfter(c.deadline, func(ctx context.Context) { done(r.readUnary(ctx, req)) })
		return
	}
	if c.err != nil {
		done(store.Record{}, false, fmt.Errorf("remote read: %w", FromStatus(c.err)))
		return // not pooled: an abandoned call may still be in flight
	}
	rec, found, err := r.readBatch(c)
	r.batch.put(c)
	done(rec, found, err)
}

// readBatch is the outcome of a batched read that got its result.
func (r *Remote) readBatch(c *call) (store.Record, bool, error) {
	if err := resultError(c.res); err != nil {
		return store.Record{}, false, fmt.Errorf("remote read: %w", FromStatus(err))
	}
	resp := c.res.GetRead()
	if resp == nil {
		return store.Record{}, false, fmt.Errorf("remote read: %w", status.Error(codes.Internal, "batch result without a read response"))
	}
	r.sawEpoch(resp.GetEpoch())
	r.sawClock(c.sent, resp.GetWallNanos())
	if !resp.GetFound() {
		return store.Record{}, false, nil
	}
	return RecordFromProto(resp.GetRecord()), true, nil
}

func (r *Remote) batchRead(ctx context.Context, key []byte) (store.Record, bool, error) {
	c := r.batch.get(ctx)
	c.rreq.Key, c.rreq.Epoch = key, r.myEpoch()
	c.read.Read = &c.rreq
	c.item.Op = &c.read
	if err := r.batch.do(ctx, c); err != nil {
		if errors.Is(err, errNoBatch) {
			return store.Record{}, false, err
		}
		return store.Record{}, false, fmt.Errorf("remote read: %w", FromStatus(err))
	}
	defer r.batch.put(c)
	return r.readBatch(c)
}

func (r *Remote) batchWrite(ctx context.Context, key []byte, rec store.Record, vid ring.ViewID) (bool, error) {
	c := r.batch.get(ctx)
	c.rec.Timestamp, c.rec.Tombstone, c.rec.Value = rec.TS, rec.Tombstone, rec.Value
	c.wreq.Key, c.wreq.Record = key, &c.rec
	c.wreq.Epoch, c.wreq.ChangeId, c.wreq.ChangeInFlight = vid.Epoch, vid.Change, vid.InFlight
	c.write.Write = &c.wreq
	c.item.Op = &c.write
	if err := r.batch.do(ctx, c); err != nil {
		if errors.Is(err, errNoBatch) {
			return false, err
		}
		return false, fmt.Errorf("remote write: %w", FromStatus(err))
	}
	defer r.batch.put(c)
	return r.wroteBatch(c)
}

// RecordToProto converts a store record to its wire form.
func RecordToProto(rec store.Record) *kvpb.Record {
	return &kvpb.Record{Timestamp: rec.TS, Tombstone: rec.Tombstone, Value: rec.Value}
}

// RecordFromProto converts a wire record to a store record. A value record
// always has a non-nil Value (an empty value is a value).
func RecordFromProto(p *kvpb.Record) store.Record {
	rec := store.Record{TS: p.GetTimestamp(), Tombstone: p.GetTombstone(), Value: p.GetValue()}
	if !rec.Tombstone && rec.Value == nil {
		rec.Value = []byte{}
	}
	return rec
}

// FromStatus decodes a gRPC error from a peer through the one error table (rpcerr.Decode):
// the error matches (errors.Is) the sentinel the peer encoded (ErrStaleView, ErrRangeDamaged,
// hlc.ErrClockOffset, store.ErrDiskFull, ...) and keeps its status. A peer that cannot serve
// the call is, to a coordinator, a replica that is unavailable whatever its reason:
// Unavailable, Aborted, Unauthenticated, PermissionDenied and ResourceExhausted (but a full
// disk) also match ErrReplicaUnavailable, and InvalidArgument of any reason
// ErrInvalidArgument.
func FromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	dec := rpcerr.Decode(err)
	var class error
	switch st.Code() {
	case codes.ResourceExhausted:
		if !errors.Is(dec, store.ErrDiskFull) {
			class = ErrReplicaUnavailable
		}
	case codes.Unavailable, codes.Aborted, codes.Unauthenticated, codes.PermissionDenied:
		class = ErrReplicaUnavailable
	case codes.InvalidArgument:
		class = ErrInvalidArgument
	}
	if class == nil || errors.Is(dec, class) {
		return dec
	}
	return fmt.Errorf("%w: %w", class, dec)
}

// unaryAfter runs send, the unary call of an asynchronous call that found no Batch, in a
// goroutine of its own with its caller's deadline, if it had one.
func unaryAfter(deadline time.Time, send func(ctx context.Context)) {
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		if !deadline.IsZero() {
			ctx, cancel = context.WithDeadline(context.Background(), deadline)
		}
		defer cancel()
		send(ctx)
	}()
}
