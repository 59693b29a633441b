package replica

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/internal/grpctest"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// replicaServer is a minimal Replica service over a real Local, standing in
// for node/server's handler: it records the epochs it sees and can fail
// every call with a status code.
type replicaServer struct {
	kvpb.UnimplementedReplicaServer
	local     *Local
	epoch     uint64
	seenEpoch atomic.Uint64
	fail      atomic.Int32 // codes.Code; OK = serve
	calls     atomic.Int64
	reason    atomic.Value // string: the ErrorInfo reason of a failure ("" = none)
}

// injected is the status of an injected failure with code c.
func (s *replicaServer) injected(c codes.Code) error {
	st := status.New(c, "injected")
	if r, _ := s.reason.Load().(string); r != "" {
		st, _ = st.WithDetails(&errdetails.ErrorInfo{Reason: r, Domain: rpcerr.Domain})
	}
	return st.Err()
}

func (s *replicaServer) Read(ctx context.Context, req *kvpb.ReadRequest) (*kvpb.ReadResponse, error) {
	s.calls.Add(1)
	s.seenEpoch.Store(req.GetEpoch())
	if c := codes.Code(s.fail.Load()); c != codes.OK {
		return nil, s.injected(c)
	}
	rec, found, err := s.local.Read(ctx, req.GetKey())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	resp := &kvpb.ReadResponse{Found: found, Epoch: s.epoch}
	if found {
		resp.Record = RecordToProto(rec)
	}
	return resp, nil
}

func (s *replicaServer) Write(ctx context.Context, req *kvpb.WriteRequest) (*kvpb.WriteResponse, error) {
	s.calls.Add(1)
	s.seenEpoch.Store(req.GetEpoch())
	if c := codes.Code(s.fail.Load()); c != codes.OK {
		return nil, s.injected(c)
	}
	applied, err := s.local.Write(ctx, req.GetKey(), RecordFromProto(req.GetRecord()), ring.ViewID{Epoch: req.GetEpoch()})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &kvpb.WriteResponse{Applied: applied, Epoch: s.epoch}, nil
}

func startReplicaServer(t *testing.T, srv *replicaServer) *grpc.ClientConn {
	t.Helper()
	return grpctest.Serve(t, func(s *grpc.Server) { kvpb.RegisterReplicaServer(s, srv) })
}

func TestRemote(t *testing.T) {
	ctx := testCtx(t)
	srv := &replicaServer{local: NewLocal(openStore(t), nil), epoch: 7}
	conn := startReplicaServer(t, srv)
	var observed atomic.Uint64
	r := NewRemote(conn, func() uint64 { return 5 }, OnEpoch(func(e uint64) { observed.Store(e) }))

	if _, found, err := r.Read(ctx, []byte("k")); err != nil || found {
		t.Fatalf("Read absent = found %v err %v, want not found", found, err)
	}
	if got := observed.Load(); got != 7 {
		t.Errorf("observed epoch = %d, want 7", got)
	}
	if got := srv.seenEpoch.Load(); got != 5 {
		t.Errorf("server saw epoch %d, want 5", got)
	}
	for _, tt := range []struct {
		rec         store.Record
		wantApplied bool
	}{
		{store.Record{TS: 10, Value: []byte{}}, true},
		{store.Record{TS: 5, Value: []byte("older")}, false},
		{store.Record{TS: 20, Tombstone: true}, true},
	} {
		applied, err := r.Write(ctx, []byte("k"), tt.rec, ring.ViewID{Epoch: 5})
		if err != nil || applied != tt.wantApplied {
			t.Fatalf("Write(%+v) = %v, %v, want %v", tt.rec, applied, err, tt.wantApplied)
		}
	}
	rec, found, err := r.Read(ctx, []byte("k"))
	if err != nil || !found || !rec.Tombstone || rec.TS != 20 {
		t.Fatalf("Read = %+v found %v err %v, want tombstone@20", rec, found, err)
	}

	tests := []struct {
		code   codes.Code
		reason string
		want   error // nil: none of this package's errors
	}{
		{codes.Unavailable, "", ErrReplicaUnavailable},
		{codes.DeadlineExceeded, "", context.DeadlineExceeded},
		{codes.InvalidArgument, "", ErrInvalidArgument},
		{codes.FailedPrecondition, rpcerr.Name(kvpb.Reason_REASON_STALE_VIEW), ErrStaleView},
		{codes.FailedPrecondition, rpcerr.Name(kvpb.Reason_REASON_RANGE_DAMAGED), ErrRangeDamaged},
		{codes.FailedPrecondition, "REFUSED", nil},
		{codes.FailedPrecondition, "", nil},
	}
	for _, tt := range tests {
		srv.fail.Store(int32(tt.code))
		srv.reason.Store(tt.reason)
		_, _, err := r.Read(ctx, []byte("k"))
		if tt.want == nil {
			if errors.Is(err, ErrStaleView) || errors.Is(err, ErrReplicaUnavailable) {
				t.Errorf("Read with %v %q error = %v, want none of the replica errors", tt.code, tt.reason, err)
			}
		} else if !errors.Is(err, tt.want) {
			t.Errorf("Read with %v %q error = %v, want %v", tt.code, tt.reason, err, tt.want)
		}
		var se interface{ GRPCStatus() *status.Status }
		if !errors.As(err, &se) || se.GRPCStatus().Code() != tt.code {
			t.Errorf("Read with %v: status code lost from %v", tt.code, err)
		}
	}
}

// A coordinator drives remote replicas over real loopback gRPC.
func TestCoordinatorOverGRPC(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	remotes := map[string]Replica{}
	for _, id := range []string{"n1", "n2"} {
		srv := &replicaServer{local: c.nodes[id].Local, epoch: 1}
		remotes[id] = NewRemote(startReplicaServer(t, srv), func() uint64 { return 1 })
	}
	co := New(Config{Hints: memHints(t, 64<<20)}, "n0", c.view.Load, c.nodes["n0"], func(m ring.Member) Replica { return remotes[m.ID] }, nil, nil)
	t.Cleanup(func() { co.Close() })
	putKEverywhere(t, ctx, co)
	rec, found, err := co.Get(ctx, []byte("k"), 3, 3)
	if err != nil || !found || string(rec.Value) != "v" {
		t.Fatalf("Get = %q found %v err %v, want %q", rec.Value, found, err, "v")
	}
}

// A peer that does not serve Batch (an older node: Unimplemented) is served by the unary
// calls, every request, with the same results; the stream is not retried before
// noBatchRetry.
func TestRemoteFallsBackToUnary(t *testing.T) {
	ctx := testCtx(t)
	srv := &replicaServer{local: NewLocal(openStore(t), nil), epoch: 3}
	conn := startReplicaServer(t, srv)
	r := NewRemote(conn, nil)
	t.Cleanup(r.Close)
	for i := range 20 {
		key := []byte{'k', byte('a' + i)}
		if applied, err := r.Write(ctx, key, store.Record{TS: uint64(10 + i), Value: key}, ring.ViewID{}); err != nil || !applied {
			t.Fatalf("write %s: applied %v err %v", key, applied, err)
		}
		rec, found, err := r.Read(ctx, key)
		if err != nil || !found || rec.TS != uint64(10+i) {
			t.Fatalf("read %s: %+v found %v err %v", key, rec, found, err)
		}
	}
	if got := srv.calls.Load(); got != 40 {
		t.Errorf("got %d unary calls, want 40 (every request, none lost to the refused stream)", got)
	}
}
