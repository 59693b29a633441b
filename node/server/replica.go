package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/node/stream"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// chunkRecords and chunkBytes bound one RangeChunk of StreamRange.
const (
	chunkRecords = 512
	chunkBytes   = 1 << 20
)

// Scanner is the part of the store StreamRange reads (store.Store). Safe for concurrent use.
type Scanner interface {
	Scan(ctx context.Context, start, end uint64, after []byte, fn func(storeKey []byte, key []byte, rec store.Record) error) error
}

// Clock checks and merges timestamps seen from coordinators (hlc.Clock): Check refuses one
// further ahead of this node's clock than its bound (hlc.ErrClockOffset). Safe for
// concurrent use.
type Clock interface {
	Check(remote uint64) error
	Update(remote uint64) error
}

// ReplicaDeps is what the internal Replica service needs.
type ReplicaDeps struct {
	// Local is this node's store as a replica (replica.Local).
	Local replica.Replica
	// Store is scanned by StreamRange; nil leaves StreamRange Unimplemented.
	Store Scanner
	// Clock, when set, refuses a record stamped too far ahead of this node's clock and is
	// advanced past every timestamp written here.
	Clock Clock
	// View returns the ring the node routes by (nil while awaiting admission); its epoch
	// goes into every response.
	View func() *ring.View
	// OnEpoch, when set, is called with the epoch of every request (the sender's ring epoch),
	// so the node notices that it is behind. Must not block.
	OnEpoch func(epoch uint64)
	// Observer, when set, is told about every Read and Write (role replica.RoleReplica).
	Observer replica.Observer
	// Fence, when set, runs before StreamRange serves a range for a change (replica.Local.Fence):
	// it waits until this node has applied the change and every write it admitted under an
	// older view has landed, so that every later write to the range also reaches the receiver.
	Fence func(ctx context.Context, vid ring.ViewID) error
	// Latency, when set, returns the recent tail latency of this node's own work (a p99 over
	// the last second or so). StreamRange then paces the ranges this node serves by it, all
	// its streams together: below LatencyTarget the pace grows step by step, above it the
	// pace halves (the same additive increase, multiplicative decrease as
	// stream.RangeClient.Latency), never above the change's rate (Rate, and the request's rate).
	// A source paces where its clients feel the stream; the receiver's pace cannot see that.
	// nil: each stream is throttled to its request's rate alone.
	Latency func() time.Duration
	// CPUWait, when set with Latency, returns the p99 of this node's goroutines' wait to run
	// over about the last stream.AdaptWindow (stream.Signals.CPUWait).
	CPUWait func() time.Duration
	// LatencyTarget is the latency the source's pace holds; 0 = stream.AdaptTargetFactor
	// times the latency before the streams began (Baseline).
	LatencyTarget time.Duration
	// Baseline, when set and LatencyTarget is 0, is the node's latency before the streams (a
	// stream.Baseline's Median): the target is twice it.
	Baseline func() time.Duration
	// Pace is the AIMD state of that pace, one for all the node's streams (the node reports
	// it); nil = the Replica's own.
	Pace *stream.Adaptive
	// Rate, when set, returns the rate of the change in flight (bytes per second; 0 = none):
	// the ceiling of the pace by Latency. It is a per-receiver rate, and the pace is this
	// source's for all of its streams: with several receivers pulling from it at once they
	// get at most one receiver's rate together.
	Rate func() uint64
	// Repair serves RangeTree, PullRanges and MarkRepaired (repair.Replica); nil leaves them
	// Unimplemented.
	Repair RepairReplica
	// Links, when set, takes the view a peer sent in Replica.Links and returns this node's
	// (replica.Coordinator.SawLinks and LinkView); nil leaves Links Unimplemented. Must not
	// block.
	Links func(theirs *kvpb.LinkView) *kvpb.LinkView
	// Stopping, when set, is closed when the gRPC server begins its graceful stop: Batch
	// streams then answer the requests they have begun and end with Unavailable, since
	// GracefulStop waits for every stream and peers keep theirs open.
	Stopping <-chan struct{}
}

// Replica implements the internal node-to-node API over the local store.
type Replica struct {
	kvpb.UnsafeReplicaServer
	d ReplicaDeps

	// The pace of StreamRange by ReplicaDeps.Latency, one for all of the node's streams.
	lim stream.Limiter
	ad  stream.Adaptive
}

var _ kvpb.ReplicaServer = (*Replica)(nil)

// pace is the AIMD state of the streams this node serves.
func (s *Replica) pace() *stream.Adaptive {
	if s.d.Pace != nil {
		return s.d.Pace
	}
	return &s.ad
}

// NewReplica returns the Replica service on d.
func NewReplica(d ReplicaDeps) *Replica { return &Replica{d: d} }

func (s *Replica) epoch() uint64 {
	if v := s.d.View(); v != nil && v.Current != nil {
		return v.Current.Epoch()
	}
	return 0
}

func (s *Replica) sawEpoch(e uint64) {
	if s.d.OnEpoch != nil && e > 0 {
		s.d.OnEpoch(e)
	}
}

func (s *Replica) observe(op replica.Op, start time.Time, err error) {
	if s.d.Observer != nil {
		s.d.Observer.ObserveOp(op, replica.RoleReplica, time.Since(start), err)
	}
}

// Read returns this node's version of a key, tombstones included.
func (s *Replica) Read(ctx context.Context, req *kvpb.ReadRequest) (_ *kvpb.ReadResponse, err error) {
	if len(req.GetKey()) == 0 {
		return nil, rpcerr.Encode(errEmptyKey)
	}
	s.sawEpoch(req.GetEpoch())
	defer func(start time.Time) { s.observe(replica.OpGet, start, err) }(time.Now())
	rec, found, err := s.d.Local.Read(ctx, req.GetKey())
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	resp := &kvpb.ReadResponse{Found: found, Epoch: s.epoch(), WallNanos: time.Now().UnixNano()}
	if found {
		resp.Record = replica.RecordToProto(rec)
	}
	return resp, nil
}

// Links swaps link views with a peer (gray failure detection).
func (s *Replica) Links(_ context.Context, req *kvpb.LinksRequest) (*kvpb.LinksResponse, error) {
	if s.d.Links == nil {
		return nil, rpcerr.Encode(fmt.Errorf("links: %w: not wired on this node", ErrUnimplemented))
	}
	return &kvpb.LinksResponse{View: s.d.Links(req.GetView())}, nil
}

// Write applies a version unless this node holds one at least as new.
func (s *Replica) Write(ctx context.Context, req *kvpb.WriteRequest) (_ *kvpb.WriteResponse, err error) {
	op, err := s.validWrite(req)
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	defer func(start time.Time) { s.observe(op, start, err) }(time.Now())
	rec, vid, err := s.checkWrite(req)
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	applied, err := s.d.Local.Write(ctx, req.GetKey(), rec, vid)
	return s.wrote(rec, applied, err)
}

// validWrite checks a write's form, notes its sender's epoch and returns its kind.
func (s *Replica) validWrite(req *kvpb.WriteRequest) (replica.Op, error) {
	if len(req.GetKey()) == 0 {
		return 0, errEmptyKey
	}
	if req.GetRecord() == nil {
		return 0, fmt.Errorf("%w: missing record", replica.ErrInvalidArgument)
	}
	s.sawEpoch(req.GetEpoch())
	if req.GetRecord().GetTombstone() {
		return replica.OpDelete, nil
	}
	return replica.OpPut, nil
}

// checkWrite checks a valid write's timestamp against this node's clock and returns its
// record and the view it was routed by.
func (s *Replica) checkWrite(req *kvpb.WriteRequest) (store.Record, ring.ViewID, error) {
	rec := replica.RecordFromProto(req.GetRecord())
	if s.d.Clock != nil {
		// A record stamped far ahead of this clock would win every later write of its key
		// and drag the cluster's clocks with it: refused, counted, never adopted.
		if err := s.d.Clock.Check(rec.TS); err != nil {
			return store.Record{}, ring.ViewID{}, err
		}
	}
	vid := ring.ViewID{Epoch: req.GetEpoch(), Change: req.GetChangeId(), InFlight: req.GetChangeInFlight()}
	return rec, vid, nil
}

// wrote is the answer to a checked write that the store applied (or held back, or failed).
func (s *Replica) wrote(rec store.Record, applied bool, err error) (*kvpb.WriteResponse, error) {
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	if s.d.Clock != nil {
		s.d.Clock.Update(rec.TS) // checked by checkWrite
	}
	return &kvpb.WriteResponse{Applied: applied, Epoch: s.epoch(), WallNanos: time.Now().UnixNano()}, nil
}

// errChunkFull stops a StreamRange scan when its chunk is full; the next chunk is read by a
// new scan resumed after the last key.
var errChunkFull = errors.New("chunk full")

// StreamRange streams the records of a token range in chunks with a checksum
// (stream.ChunkChecksum).
func (s *Replica) StreamRange(req *kvpb.StreamRangeRequest, srv kvpb.Replica_StreamRangeServer) error {
	if s.d.Store == nil {
		return rpcerr.Encode(fmt.Errorf("stream range: %w: not wired on this node", ErrUnimplemented))
	}
	ctx := srv.Context()
	s.sawEpoch(req.GetEpoch())
	if s.d.Fence != nil && req.GetChangeId() != 0 {
		vid := ring.ViewID{Epoch: req.GetEpoch(), Change: req.GetChangeId(), InFlight: true}
		if err := s.d.Fence(ctx, vid); err != nil {
			return status.Error(codes.Unavailable, fmt.Sprintf("stream range: %v", err))
		}
	}
	pace := s.pacer(req.GetRateBytes())
	var after []byte
	if len(req.GetResumeAfter()) > 0 {
		after = req.GetResumeAfter()
	}
	// One read transaction per chunk, resumed after the chunk's last key: a transaction pins
	// the versions it reads (badger keeps them through compactions) for as long as it lives,
	// so a throttled or slow stream must not hold one between chunks.
	for {
		chunk := &kvpb.RangeChunk{}
		size := 0
		var lastKey []byte
		err := s.d.Store.Scan(ctx, req.GetStart(), req.GetEnd(), after, func(sk []byte, key []byte, rec store.Record) error {
			chunk.Records = append(chunk.Records, &kvpb.KeyRecord{Key: key, Record: replica.RecordToProto(rec)})
			size += len(key) + len(rec.Value) + 16
			if len(chunk.Records) >= chunkRecords || size >= chunkBytes {
				lastKey = sk
				return errChunkFull
			}
			return nil
		})
		full := errors.Is(err, errChunkFull)
		if err != nil && !full {
			return rpcerr.Encode(fmt.Errorf("stream range (%d, %d]: %w", req.GetStart(), req.GetEnd(), err))
		}
		chunk.Last = !full
		chunk.Checksum = stream.ChunkChecksum(chunk.Records)
		if err := srv.Send(chunk); err != nil {
			return err
		}
		if chunk.Last {
			return nil
		}
		after = lastKey
		if err := pace(ctx, size); err != nil {
			return err
		}
	}
}

// pacer returns how one StreamRange waits after sending a chunk of n bytes: by this node's
// latency when ReplicaDeps.Latency is set (sharing one byte budget with the node's other
// streams), else at the request's fixed rate (per stream).
func (s *Replica) pacer(reqRate uint64) func(ctx context.Context, n int) error {
	if s.d.Latency == nil {
		var own stream.Limiter // this stream's alone
		fixed := func() uint64 { return reqRate }
		return func(ctx context.Context, n int) error { return own.Wait(ctx, n, fixed, nil) }
	}
	rate := func() uint64 {
		limit := reqRate
		if s.d.Rate != nil {
			if r := s.d.Rate(); r > 0 && (limit == 0 || r < limit) {
				limit = r
			}
		}
		return s.pace().Rate(limit, stream.ReadSignals(s.d.Latency, s.d.CPUWait), stream.Target(s.d.LatencyTarget, s.d.Baseline), time.Now())
	}
	return func(ctx context.Context, n int) error { return s.lim.Wait(ctx, n, rate, nil) }
}
