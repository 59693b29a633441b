package server

import (
	"context"
	"fmt"
	"time"

	"ringkv/node/repair"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// Repairs is the repair domain the Admin service hands the repair RPCs to (repair.Service):
// it plans, refuses, runs one session at a time and reports. Safe for concurrent use.
type Repairs interface {
	Plan(ctx context.Context, req *kvpb.RepairRequest) (*kvpb.RepairPlan, error)
	Start(ctx context.Context, req *kvpb.RepairRequest) (*kvpb.RepairPlan, error)
	Progress() *kvpb.RepairProgress
	Abort(ctx context.Context) (*kvpb.RepairProgress, error)
	// Pause and Resume pause and resume repair cluster-wide; by names who asked.
	Pause(ctx context.Context, by, reason string) (*kvpb.RepairProgress, error)
	Resume(ctx context.Context, by string) (*kvpb.RepairProgress, error)
	// Watch is closed at the next change of the progress.
	Watch() <-chan struct{}
}

var _ Repairs = (*repair.Service)(nil)

// RepairReplica is a replica's side of repair (repair.Replica): trees of its ranges, pulls
// from another replica, and the record of completed repairs. Safe for concurrent use.
type RepairReplica interface {
	Tree(ctx context.Context, start, end uint64, depth int, rateBytes uint64) (*repair.Tree, error)
	Summary(ctx context.Context, start, end uint64, depth int, rateBytes uint64) (uint64, *repair.Tree, error)
	Under(id uint64, level int, nodes []uint32) (*repair.Tree, []repair.Leaf, error)
	Pull(ctx context.Context, source ring.Member, spans []repair.Span, rateBytes uint64) (repair.PullResult, error)
	MarkRepaired(ctx context.Context, ranges []repair.Span, started, finished time.Time) (int, error)
}

var _ RepairReplica = (*repair.Replica)(nil)

func (s *Admin) repairs() error {
	if s.d.Repairs == nil {
		return fmt.Errorf("repair: %w", ErrUnimplemented)
	}
	return nil
}

// PlanRepair computes what a repair would compare, with estimates and refusals.
func (s *Admin) PlanRepair(ctx context.Context, req *kvpb.RepairRequest) (*kvpb.RepairPlan, error) {
	if err := s.repairs(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	plan, err := s.d.Repairs.Plan(ctx, req)
	return plan, rpcerr.Encode(err)
}

// StartRepair starts a repair session coordinated by this node unless refused.
func (s *Admin) StartRepair(ctx context.Context, req *kvpb.RepairRequest) (*kvpb.RepairPlan, error) {
	if err := s.repairs(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	plan, err := s.d.Repairs.Start(ctx, req)
	return plan, rpcerr.Encode(err)
}

// RepairStatus is the progress of this node's session in flight, else its last one.
func (s *Admin) RepairStatus(context.Context, *kvpb.RepairStatusRequest) (*kvpb.RepairProgress, error) {
	if err := s.repairs(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	return s.d.Repairs.Progress(), nil
}

// WatchRepair pushes the progress every interval and at every change until the session is
// over (its final state is the last message).
func (s *Admin) WatchRepair(req *kvpb.RepairStatusRequest, stream kvpb.Admin_WatchRepairServer) error {
	if err := s.repairs(); err != nil {
		return rpcerr.Encode(err)
	}
	return watchLoop(stream.Context(), s.d.Draining, time.Duration(req.GetIntervalMs())*time.Millisecond,
		s.d.Repairs.Watch, s.d.Repairs.Progress, stream.Send,
		func(p *kvpb.RepairProgress) bool { return p.GetState() != kvpb.RepairState_REPAIR_STATE_RUNNING })
}

// AbortRepair stops this node's session in flight and returns its final progress.
func (s *Admin) AbortRepair(ctx context.Context, _ *kvpb.AbortRepairRequest) (*kvpb.RepairProgress, error) {
	if err := s.repairs(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	p, err := s.d.Repairs.Abort(ctx)
	return p, rpcerr.Encode(err)
}

// PauseRepair pauses repair cluster-wide (journaled with who, when and why).
func (s *Admin) PauseRepair(ctx context.Context, req *kvpb.PauseRepairRequest) (*kvpb.RepairProgress, error) {
	if err := s.repairs(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	p, err := s.d.Repairs.Pause(ctx, caller(ctx, req.GetBy()), req.GetReason())
	return p, rpcerr.Encode(err)
}

// ResumeRepair lifts the pause.
func (s *Admin) ResumeRepair(ctx context.Context, req *kvpb.ResumeRepairRequest) (*kvpb.RepairProgress, error) {
	if err := s.repairs(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	p, err := s.d.Repairs.Resume(ctx, caller(ctx, req.GetBy()))
	return p, rpcerr.Encode(err)
}

func (s *Replica) repairReplica() error {
	if s.d.Repair == nil {
		return fmt.Errorf("repair: %w", ErrUnimplemented)
	}
	return nil
}

// RangeTree hashes a token range of this node into a Merkle tree: every non-empty leaf, or a
// descent's summary (one level's nodes) and then the leaves under some of those nodes.
func (s *Replica) RangeTree(ctx context.Context, req *kvpb.RangeTreeRequest) (*kvpb.RangeTreeResponse, error) {
	if err := s.repairReplica(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	s.sawEpoch(req.GetEpoch())
	depth, rate := int(req.GetDepth()), req.GetRateBytes()
	switch {
	case req.GetSummary():
		id, t, err := s.d.Repair.Summary(ctx, req.GetStart(), req.GetEnd(), depth, rate)
		if err != nil {
			return nil, rpcerr.Encode(err)
		}
		level := min(int(req.GetLevel()), t.Depth)
		return &kvpb.RangeTreeResponse{Depth: uint32(t.Depth), TreeId: id, Level: uint32(level), Nodes: repair.EncodeNodes(t.Level(level)),
			Keys: t.Keys, Bytes: t.Bytes, Epoch: s.epoch()}, nil
	case req.GetTreeId() != 0:
		t, leaves, err := s.d.Repair.Under(req.GetTreeId(), int(req.GetLevel()), req.GetSubtrees())
		if err != nil {
			return nil, rpcerr.Encode(err)
		}
		return &kvpb.RangeTreeResponse{Depth: uint32(t.Depth), TreeId: req.GetTreeId(), Level: req.GetLevel(), Leaves: repair.EncodeLeaves(leaves),
			Keys: t.Keys, Bytes: t.Bytes, Epoch: s.epoch()}, nil
	}
	t, err := s.d.Repair.Tree(ctx, req.GetStart(), req.GetEnd(), depth, rate)
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.RangeTreeResponse{Depth: uint32(t.Depth), Leaves: repair.EncodeLeaves(t.Leaves), Keys: t.Keys, Bytes: t.Bytes, Epoch: s.epoch()}, nil
}

// PullRanges pulls token ranges from another replica into this node.
func (s *Replica) PullRanges(ctx context.Context, req *kvpb.PullRangesRequest) (*kvpb.PullRangesResponse, error) {
	if err := s.repairReplica(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	if req.GetSourceAddr() == "" {
		return nil, rpcerr.Encode(fmt.Errorf("%w: pull ranges: no source address", replica.ErrInvalidArgument))
	}
	s.sawEpoch(req.GetEpoch())
	res, err := s.d.Repair.Pull(ctx, ring.Member{ID: req.GetSourceId(), Addr: req.GetSourceAddr()}, spans(req.GetSpans()), req.GetRateBytes())
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.PullRangesResponse{KeysReceived: res.Received, KeysApplied: res.Applied, BytesReceived: res.Bytes, Epoch: s.epoch()}, nil
}

// MarkRepaired records a completed repair of ranges and purges what it makes safe to.
func (s *Replica) MarkRepaired(ctx context.Context, req *kvpb.MarkRepairedRequest) (*kvpb.MarkRepairedResponse, error) {
	if err := s.repairReplica(); err != nil {
		return nil, rpcerr.Encode(err)
	}
	s.sawEpoch(req.GetEpoch())
	n, err := s.d.Repair.MarkRepaired(ctx, spans(req.GetRanges()), time.Unix(0, req.GetStartedUnixNanos()), time.Unix(0, req.GetFinishedUnixNanos()))
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.MarkRepairedResponse{TombstonesPurged: uint64(n), Epoch: s.epoch()}, nil
}

func spans(ks []*kvpb.KeySpan) []repair.Span {
	out := make([]repair.Span, len(ks))
	for i, k := range ks {
		out[i] = repair.Span{Start: k.GetStart(), End: k.GetEnd()}
	}
	return out
}
