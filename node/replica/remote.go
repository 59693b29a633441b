package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/node/hlc"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
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
}

var _ Replica = (*Remote)(nil)

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
	for _, o := range opts {
		o(r)
	}
	if !r.unary {
		r.batch = newBatcher(r.client)
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
	sent := time.Now()
	resp, err := r.client.Read(ctx, &kvpb.ReadRequest{Key: key, Epoch: r.myEpoch()})
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
	sent := time.Now()
	resp, err := r.client.Write(ctx, &kvpb.WriteRequest{Key: key, Record: RecordToProto(rec), Epoch: vid.Epoch, ChangeId: vid.Change, ChangeInFlight: vid.InFlight})
	if err != nil {
		return false, fmt.Errorf("remote write: %w", FromStatus(err))
	}
	r.sawEpoch(resp.GetEpoch())
	r.sawClock(sent, resp.GetWallNanos())
	return resp.GetApplied(), nil
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

// FromStatus maps a gRPC error from a peer to this package's errors (and
// hlc.ErrClockOffset for FailedPrecondition with ReasonClockOffset):
// Unavailable, ResourceExhausted, Aborted, Unauthenticated and
// PermissionDenied to ErrReplicaUnavailable, DeadlineExceeded and Canceled
// to the context errors, InvalidArgument to ErrInvalidArgument,
// FailedPrecondition with the ErrorInfo reason ReasonStaleView to
// ErrStaleView, ReasonRangeDamaged to ErrRangeDamaged, ResourceExhausted with ReasonDiskFull to store.ErrDiskFull. Other codes, and FailedPrecondition for any other reason (a
// refused ring change, a busy capture), keep the status error. The status
// message is kept in the text.
func FromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var sentinel error
	switch st.Code() {
	case codes.ResourceExhausted:
		sentinel = ErrReplicaUnavailable
		if Reason(err) == ReasonDiskFull {
			sentinel = store.ErrDiskFull
		}
	case codes.Unavailable, codes.Aborted, codes.Unauthenticated, codes.PermissionDenied:
		sentinel = ErrReplicaUnavailable
	case codes.DeadlineExceeded:
		sentinel = context.DeadlineExceeded
	case codes.Canceled:
		sentinel = context.Canceled
	case codes.InvalidArgument:
		sentinel = ErrInvalidArgument
	case codes.FailedPrecondition:
		switch Reason(err) {
		case ReasonStaleView:
			sentinel = ErrStaleView
		case ReasonClockOffset:
			sentinel = hlc.ErrClockOffset
		case ReasonRangeDamaged:
			sentinel = ErrRangeDamaged
		default:
			return err
		}
	default:
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

// Reason is the reason of the ErrorInfo of ErrorDomain in err's gRPC status
// ("" when it has none).
func Reason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}
