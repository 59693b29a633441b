package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// service is the Cluster gRPC service: the raft transport tunnel and the leader's end of
// forwarded ring changes. Handlers are thin: domain call, then the one error table (rpcerr.Encode);
// the caller decodes the leader's answer with rpcerr.Decode.
type service struct {
	kvpb.UnsafeClusterServer
	c *Cluster
}

var _ kvpb.ClusterServer = (*service)(nil)

func (s *service) RaftStream(stream kvpb.Cluster_RaftStreamServer) error {
	if err := s.c.layer.serve(stream); err != nil {
		return rpcerr.Encode(err)
	}
	return nil
}

func (s *service) BeginChange(ctx context.Context, req *kvpb.BeginChangeRequest) (*kvpb.BeginChangeResponse, error) {
	if !s.c.IsLeader() {
		return nil, rpcerr.Encode(ErrNotLeader)
	}
	cr := ChangeRequest{
		Kind: req.GetKind(), NodeID: req.GetNodeId(), Addr: req.GetGrpcAddr(), Force: req.GetForce(), RateBytes: req.GetRateBytes(),
		Tokens: TokenMovesFromProto(req.GetTokenMoves()), By: req.GetBy(),
	}
	if b := req.GetPredictionJson(); len(b) > 0 {
		cr.Prediction = &Prediction{}
		if err := json.Unmarshal(b, cr.Prediction); err != nil {
			return nil, rpcerr.Encode(fmt.Errorf("decode prediction: %v: %w", err, ErrInvalidArgument))
		}
	}
	id, err := s.c.beginLocal(cr)
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.BeginChangeResponse{ChangeId: id, ToEpoch: s.c.Epoch() + 1}, nil
}

func (s *service) AbortChange(ctx context.Context, req *kvpb.AbortClusterChangeRequest) (*kvpb.AbortClusterChangeResponse, error) {
	if !s.c.IsLeader() {
		return nil, rpcerr.Encode(ErrNotLeader)
	}
	if _, err := s.c.apply(command{Op: opAbort, ChangeID: req.GetChangeId(), Unix: nowUnix()}); err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.AbortClusterChangeResponse{}, nil
}

func (s *service) MoveDone(ctx context.Context, req *kvpb.MoveDoneRequest) (*kvpb.MoveDoneResponse, error) {
	if !s.c.IsLeader() {
		return nil, rpcerr.Encode(ErrNotLeader)
	}
	if _, err := s.c.apply(command{Op: opMoveDone, ChangeID: req.GetChangeId(), Move: int(req.GetMove())}); err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.MoveDoneResponse{}, nil
}

func (s *service) SetRate(ctx context.Context, req *kvpb.SetRateRequest) (*kvpb.SetRateResponse, error) {
	return &kvpb.SetRateResponse{}, s.leaderApply(command{Op: opSetRate, NodeID: req.GetNodeId(), RateBytes: req.GetRateBytes()})
}

func (s *service) SetParallel(ctx context.Context, req *kvpb.SetParallelRequest) (*kvpb.SetParallelResponse, error) {
	return &kvpb.SetParallelResponse{}, s.leaderApply(command{Op: opParallel, Parallel: int(req.GetParallel())})
}

func (s *service) PauseChange(ctx context.Context, req *kvpb.PauseClusterChangeRequest) (*kvpb.PauseClusterChangeResponse, error) {
	return &kvpb.PauseClusterChangeResponse{}, s.leaderApply(command{Op: opPause, By: req.GetBy(), Reason: req.GetReason(), Unix: nowUnix()})
}

func (s *service) ResumeChange(ctx context.Context, req *kvpb.ResumeClusterChangeRequest) (*kvpb.ResumeClusterChangeResponse, error) {
	return &kvpb.ResumeClusterChangeResponse{}, s.leaderApply(command{Op: opResume, By: req.GetBy(), Unix: nowUnix()})
}

// leaderApply applies cmd on this node, which must lead, and encodes the error.
func (s *service) leaderApply(cmd command) error {
	if !s.c.IsLeader() {
		return rpcerr.Encode(ErrNotLeader)
	}
	_, err := s.c.apply(cmd)
	return rpcerr.Encode(err)
}

func (s *service) JournalRepair(ctx context.Context, req *kvpb.JournalRepairRequest) (*kvpb.JournalRepairResponse, error) {
	if !s.c.IsLeader() {
		return nil, rpcerr.Encode(ErrNotLeader)
	}
	id, index, err := s.c.journalRepairLocal(req.GetCommand())
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.JournalRepairResponse{Id: id, Index: index}, nil
}

// isUnavailable reports whether err is Unavailable without a reason: the leader could not be
// reached (a refusal such as NOT_LEADER carries its reason).
func isUnavailable(err error) bool {
	return rpcerr.ReasonOf(err) == kvpb.Reason_REASON_UNSPECIFIED && status.Code(err) == codes.Unavailable
}
