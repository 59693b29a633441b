package cluster

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
)

// service is the Cluster gRPC service: the raft transport tunnel and the leader's end of
// forwarded ring changes. Handlers are thin: domain call, then the error table.
type service struct {
	kvpb.UnsafeClusterServer
	c *Cluster
}

var _ kvpb.ClusterServer = (*service)(nil)

func (s *service) RaftStream(stream kvpb.Cluster_RaftStreamServer) error {
	if err := s.c.layer.serve(stream); err != nil {
		return toStatus(err)
	}
	return nil
}

func (s *service) BeginChange(ctx context.Context, req *kvpb.BeginChangeRequest) (*kvpb.BeginChangeResponse, error) {
	if !s.c.IsLeader() {
		return nil, toStatus(ErrNotLeader)
	}
	id, err := s.c.beginLocal(ChangeRequest{
		Kind: req.GetKind(), NodeID: req.GetNodeId(), Addr: req.GetGrpcAddr(), Force: req.GetForce(), RateBytes: req.GetRateBytes(),
		Tokens: TokenMovesFromProto(req.GetTokenMoves()),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.BeginChangeResponse{ChangeId: id, ToEpoch: s.c.Epoch() + 1}, nil
}

func (s *service) AbortChange(ctx context.Context, req *kvpb.AbortClusterChangeRequest) (*kvpb.AbortClusterChangeResponse, error) {
	if !s.c.IsLeader() {
		return nil, toStatus(ErrNotLeader)
	}
	if _, err := s.c.apply(command{Op: opAbort, ChangeID: req.GetChangeId(), Unix: nowUnix()}); err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.AbortClusterChangeResponse{}, nil
}

func (s *service) MoveDone(ctx context.Context, req *kvpb.MoveDoneRequest) (*kvpb.MoveDoneResponse, error) {
	if !s.c.IsLeader() {
		return nil, toStatus(ErrNotLeader)
	}
	if _, err := s.c.apply(command{Op: opMoveDone, ChangeID: req.GetChangeId(), Move: int(req.GetMove())}); err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.MoveDoneResponse{}, nil
}

func (s *service) SetRate(ctx context.Context, req *kvpb.SetRateRequest) (*kvpb.SetRateResponse, error) {
	if !s.c.IsLeader() {
		return nil, toStatus(ErrNotLeader)
	}
	if _, err := s.c.apply(command{Op: opSetRate, RateBytes: req.GetRateBytes()}); err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.SetRateResponse{}, nil
}

// errorTable maps each sentinel to a gRPC code and a reason that travels in the status
// details, so fromStatus gives the caller the same sentinel back.
var errorTable = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{ErrChangeInFlight, codes.FailedPrecondition, "CHANGE_IN_FLIGHT"},
	{ErrNoChange, codes.FailedPrecondition, "NO_CHANGE"},
	{ErrUnsafe, codes.FailedPrecondition, "UNSAFE"},
	{ErrMemberExists, codes.AlreadyExists, "MEMBER_EXISTS"},
	{ErrUnknownMember, codes.NotFound, "UNKNOWN_MEMBER"},
	{ErrNoRing, codes.FailedPrecondition, "NO_RING"},
	{ErrNoLeader, codes.Unavailable, "NO_LEADER"},
	{ErrNotLeader, codes.Unavailable, "NOT_LEADER"},
	{ErrInvalidArgument, codes.InvalidArgument, "INVALID_ARGUMENT"},
	{ErrClosed, codes.Unavailable, "CLOSED"},
	{errShutdown, codes.Unavailable, "SHUTDOWN"},
}

const errorDomain = "cluster.ringkv"

func toStatus(err error) error {
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			st := status.New(e.code, err.Error())
			if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: e.reason, Domain: errorDomain}); derr == nil {
				st = d
			}
			return st.Err()
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Internal, err.Error())
}

// statusError is an error from the leader carrying its message and the sentinel it wrapped.
type statusError struct {
	msg      string
	sentinel error
}

func (e *statusError) Error() string { return e.msg }
func (e *statusError) Unwrap() error { return e.sentinel }

func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != errorDomain {
			continue
		}
		for _, e := range errorTable {
			if e.reason == info.GetReason() {
				return &statusError{msg: st.Message(), sentinel: e.err}
			}
		}
	}
	return err
}

func isUnavailable(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return false
	}
	return status.Code(err) == codes.Unavailable
}
