package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"ringkv/node/change"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// Changes is the ring-change domain the Admin service hands change RPCs to (change.Service):
// it plans, refuses, journals and reports; the handlers only translate. Safe for concurrent
// use; its methods that take a ctx ask other members and honour its deadline.
type Changes interface {
	Plan(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error)
	Start(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error)
	Abort(ctx context.Context) (*kvpb.ChangeProgress, error)
	SetRate(ctx context.Context, nodeID string, rateBytes uint64, unlimited bool) (*kvpb.ChangeProgress, error)
	SetParallel(ctx context.Context, parallel int) (*kvpb.ChangeProgress, error)
	Pause(ctx context.Context, by, reason string) (*kvpb.ChangeProgress, error)
	Resume(ctx context.Context, by string) (*kvpb.ChangeProgress, error)
	// Progress gathers the progress of the change in flight (or the last one) from every
	// receiver; LocalProgress is this node's own as a receiver.
	Progress(ctx context.Context) *kvpb.ChangeProgress
	LocalProgress() *kvpb.ChangeProgress
	// Flying reports whether a change is in flight; Watch is closed at the next change of
	// the cluster's state.
	Flying() bool
	Watch() <-chan struct{}
	// CountRanges counts what this node stores in each range.
	CountRanges(ranges []*kvpb.TokenRange) ([]*kvpb.RangeCount, error)
	// History lists the last finished changes, newest first, with their predicted and
	// observed load (limit 0: all kept; id: only that one).
	History(limit int, id uint64) ([]*kvpb.ChangeRecord, error)
}

var _ Changes = (*change.Service)(nil)

func (s *Admin) changes() error {
	if s.d.Changes == nil {
		return fmt.Errorf("ring changes: %w", ErrUnimplemented)
	}
	return nil
}

// PlanChange computes what a change would do, with estimates, warnings and refusals.
func (s *Admin) PlanChange(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error) {
	if err := s.changes(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	plan, err := s.d.Changes.Plan(ctx, req)
	return plan, rpcerr.Encode(err)
}

// StartChange plans a change and journals it unless refused. It returns once the change is
// in flight.
func (s *Admin) StartChange(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error) {
	if err := s.changes(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	req = proto.CloneOf(req)
	req.By = caller(ctx, req.GetBy())
	plan, err := s.d.Changes.Start(ctx, req)
	return plan, rpcerr.Encode(err)
}

// ChangeHistory lists the last finished changes with their predicted and observed load.
func (s *Admin) ChangeHistory(_ context.Context, req *kvpb.ChangeHistoryRequest) (*kvpb.ChangeHistoryResponse, error) {
	if err := s.changes(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	recs, err := s.d.Changes.History(int(req.GetLimit()), req.GetId())
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.ChangeHistoryResponse{Changes: recs}, nil
}

// CountRanges counts what this node stores in each range.
func (s *Admin) CountRanges(_ context.Context, req *kvpb.CountRangesRequest) (*kvpb.CountRangesResponse, error) {
	if err := s.changes(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	counts, err := s.d.Changes.CountRanges(req.GetRanges())
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.CountRangesResponse{Counts: counts}, nil
}

// ChangeStatus gathers the progress of the change in flight (or the last one) from every
// receiver; with local, only this node's own progress as a receiver.
func (s *Admin) ChangeStatus(ctx context.Context, req *kvpb.ChangeStatusRequest) (*kvpb.ChangeProgress, error) {
	if err := s.changes(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	if req.GetLocal() {
		return s.d.Changes.LocalProgress(), nil
	}
	return s.d.Changes.Progress(ctx), nil
}

// WatchChange pushes the progress every interval and at every state change until the change
// leaves flight (its final state is the last message).
func (s *Admin) WatchChange(req *kvpb.ChangeStatusRequest, stream kvpb.Admin_WatchChangeServer) error {
	if err := s.changes(); err != nil {
		return rpcerr.Encode(err)
	}
	ctx := stream.Context()
	return watchLoop(ctx, s.d.Draining, time.Duration(req.GetIntervalMs())*time.Millisecond,
		s.d.Changes.Watch, func() *kvpb.ChangeProgress { return s.d.Changes.Progress(ctx) }, stream.Send,
		func(p *kvpb.ChangeProgress) bool { return !p.GetState().InFlight() })
}

// AbortChange cancels the change in flight and returns its final progress.
func (s *Admin) AbortChange(ctx context.Context, _ *kvpb.AbortChangeRequest) (*kvpb.ChangeProgress, error) {
	if err := s.changes(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	p, err := s.d.Changes.Abort(ctx)
	return p, rpcerr.Encode(err)
}

// SetChangeRate changes the streaming throttle of the change in flight.
func (s *Admin) SetChangeRate(ctx context.Context, req *kvpb.SetChangeRateRequest) (*kvpb.ChangeProgress, error) {
	if err := s.changes(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	p, err := s.d.Changes.SetRate(ctx, req.GetNodeId(), req.GetRateBytes(), req.GetUnlimited())
	return p, rpcerr.Encode(err)
}

// SetChangeParallel sets the pulls at once per receiver of the change in flight.
func (s *Admin) SetChangeParallel(ctx context.Context, req *kvpb.SetChangeParallelRequest) (*kvpb.ChangeProgress, error) {
	if err := s.changes(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	p, err := s.d.Changes.SetParallel(ctx, int(req.GetParallel()))
	return p, rpcerr.Encode(err)
}

// PauseChange pauses the change in flight, in the name of the caller's certificate when it
// has one, else of the name the request gives.
func (s *Admin) PauseChange(ctx context.Context, req *kvpb.PauseChangeRequest) (*kvpb.ChangeProgress, error) {
	if err := s.changes(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	p, err := s.d.Changes.Pause(ctx, caller(ctx, req.GetBy()), req.GetReason())
	return p, rpcerr.Encode(err)
}

// ResumeChange resumes the paused change.
func (s *Admin) ResumeChange(ctx context.Context, req *kvpb.ResumeChangeRequest) (*kvpb.ChangeProgress, error) {
	if err := s.changes(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	p, err := s.d.Changes.Resume(ctx, caller(ctx, req.GetBy()))
	return p, rpcerr.Encode(err)
}

// maxCallerName bounds the name a request gives for its caller.
const maxCallerName = 128

// caller names who makes an admin call: the common name of its verified client certificate,
// else the name the request supplies ("kvctl@host"), else "unknown".
func caller(ctx context.Context, supplied string) string {
	if leaf := tlsLeaf(ctx); leaf != nil && leaf.Subject.CommonName != "" {
		return leaf.Subject.CommonName
	}
	if supplied = strings.TrimSpace(supplied); supplied != "" {
		return supplied[:min(len(supplied), maxCallerName)]
	}
	return "unknown"
}
