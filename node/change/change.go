// Package change plans, starts and reports ring changes on behalf of the Admin service: it
// turns a kvpb.ChangeRequest into the cluster's plan with estimates (each move's source
// counts its ranges), ownership before and after, warnings and refusals (an unreachable or
// non-empty newcomer, a receiver short of free disk), journals the change through the
// metadata group (node/cluster) unless refused, and gathers the progress of the change in
// flight from its receivers. Refusal rules live here and nowhere else; node/server only
// translates.
package change

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"ringkv/node/cluster"
	"ringkv/node/peers"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// ErrRefused: a ring change whose plan has refusals was started without force, or one with
// nothing to move.
var ErrRefused = rpcerr.New(kvpb.Reason_REASON_REFUSED, "ring change refused")

// Cluster is the metadata group's ring-change API (cluster.Cluster). Safe for concurrent
// use; the change calls forward to the raft leader.
type Cluster interface {
	Plan(req cluster.ChangeRequest) (*cluster.Plan, error)
	Begin(ctx context.Context, req cluster.ChangeRequest) (*cluster.Change, error)
	MoveDone(ctx context.Context, changeID uint64, move int) error
	Abort(ctx context.Context, changeID uint64) error
	SetRate(ctx context.Context, rateBytes uint64) error
	Change() *cluster.Change
	LastChange() *cluster.Change
	Watch() <-chan struct{}
}

var _ Cluster = (*cluster.Cluster)(nil)

// RangeCounter counts the records a node stores in a token range (store.Store). Safe for
// concurrent use.
type RangeCounter interface {
	CountRange(start, end uint64) (keys, bytes uint64, err error)
}

// Mover is this node's part of a ring change as a receiver (cluster.Mover). Safe for
// concurrent use.
type Mover interface {
	Progress() []cluster.MoveProgress
}

// StatsSource gives snapshots of a node's counters (metrics.Registry). Safe for concurrent use.
type StatsSource interface {
	Snapshot(withVnodes bool) *kvpb.NodeStats
}

// Config is what a Service works with. Every field but Stats and Mover is required.
type Config struct {
	// Cluster journals changes.
	Cluster Cluster
	// View returns the ring the node routes by; nil while awaiting admission.
	View func() *ring.View
	// Peers reaches the other members' Admin services (NodeInfo, Stats, CountRanges,
	// ChangeStatus); this node answers for itself through Info, Stats, Counter and Mover.
	Peers peers.Peers
	// Info describes this node (its NodeInfo). Must not block for long.
	Info func(ctx context.Context) *kvpb.NodeInfoResponse
	// Stats is this node's per-vnode load, for rebalance plans; nil asks it over gRPC.
	Stats StatsSource
	// Counter counts what this node stores in a token range.
	Counter RangeCounter
	// Mover reports this node's moves as a receiver; nil: none.
	Mover Mover
	// DefaultRate is the streaming throttle of a change whose request names none (bytes/s).
	DefaultRate uint64
	// Paces returns this node's paces of the streams it pulls and serves, those in use; nil:
	// none reported.
	Paces func() []*kvpb.Pace
}

// Service plans, starts and reports ring changes. Safe for concurrent use.
type Service struct {
	cfg Config

	estMu sync.Mutex
	est   map[uint64]map[moveKey]rangeCount // per change: estimated keys/bytes per move
}

// New returns a Service on cfg.
func New(cfg Config) *Service {
	return &Service{cfg: cfg, est: map[uint64]map[moveKey]rangeCount{}}
}

type moveKey struct {
	start, end uint64
	target     string
}

type rangeCount struct{ keys, bytes uint64 }

// Plan computes what a change would do, with estimates, warnings and refusals.
func (s *Service) Plan(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error) {
	plan, _, _, err := s.plan(ctx, req)
	return plan, err
}

// Start plans a change and journals it unless the plan has refusals (force overrides those
// that forcing can help) or nothing to move (ErrRefused). It returns once the change is in
// flight. A forced change gives up at once on the moves that cannot happen while nodes are
// down (no live replica of the range, or a receiver that does not answer): it records them
// done, so that the change completes without those nodes.
func (s *Service) Start(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error) {
	plan, est, cp, err := s.plan(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(plan.Refusals) > 0 && !req.GetForce() {
		return nil, fmt.Errorf("%w: %s", ErrRefused, strings.Join(plan.Refusals, "; "))
	}
	if len(plan.Moves) == 0 && plan.GetFromEpoch() == plan.GetToEpoch() {
		return nil, fmt.Errorf("%w: nothing to move: %s", ErrRefused, strings.Join(plan.Warnings, "; "))
	}
	cr, _ := changeRequest(plan.Request) // a rebalance's request now names its vnodes
	if cr.RateBytes == 0 {
		cr.RateBytes = s.cfg.DefaultRate
	}
	ch, err := s.cfg.Cluster.Begin(ctx, cr)
	if err != nil {
		return nil, err
	}
	for i, mv := range ch.Moves {
		m := ring.Move{Start: mv.Start, End: mv.End, Source: mv.Source, Target: mv.Target}
		if !cp.skipped(m) || mv.Done {
			continue
		}
		// Nothing will be streamed for it: its progress counts nothing.
		est[moveKey{m.Start, m.End, m.Target}] = rangeCount{}
		if err := s.cfg.Cluster.MoveDone(ctx, ch.ID, i); err != nil {
			return nil, fmt.Errorf("give up move %d (%s) of change %d: %w", i, m, ch.ID, err)
		}
	}
	s.estMu.Lock()
	s.est[ch.ID] = est
	s.estMu.Unlock()
	plan.Id = ch.ID
	plan.Request.RateBytes = cr.RateBytes
	return plan, nil
}

// Abort cancels the change in flight and returns its final progress.
func (s *Service) Abort(ctx context.Context) (*kvpb.ChangeProgress, error) {
	if err := s.cfg.Cluster.Abort(ctx, 0); err != nil {
		return nil, fmt.Errorf("abort: %w", err)
	}
	return s.Progress(ctx), nil
}

// SetRate changes the streaming throttle of the change in flight (cluster.ErrNoChange when
// none flies) and returns its progress.
func (s *Service) SetRate(ctx context.Context, rateBytes uint64) (*kvpb.ChangeProgress, error) {
	if s.cfg.Cluster.Change() == nil {
		return nil, cluster.ErrNoChange
	}
	if err := s.cfg.Cluster.SetRate(ctx, rateBytes); err != nil {
		return nil, fmt.Errorf("set rate: %w", err)
	}
	return s.Progress(ctx), nil
}

// Flying reports whether a change is in flight.
func (s *Service) Flying() bool { return s.cfg.Cluster.Change() != nil }

// Watch returns a channel closed at the next change of the cluster's state.
func (s *Service) Watch() <-chan struct{} { return s.cfg.Cluster.Watch() }

// CountRanges counts what this node stores in each range.
func (s *Service) CountRanges(ranges []*kvpb.TokenRange) ([]*kvpb.RangeCount, error) {
	var out []*kvpb.RangeCount
	for _, r := range ranges {
		k, b, err := s.cfg.Counter.CountRange(r.GetStart(), r.GetEnd())
		if err != nil {
			return nil, fmt.Errorf("count range (%d, %d]: %w", r.GetStart(), r.GetEnd(), err)
		}
		out = append(out, &kvpb.RangeCount{Keys: k, Bytes: b})
	}
	return out, nil
}

func changeRequest(req *kvpb.ChangeRequest) (cluster.ChangeRequest, error) {
	cr := cluster.ChangeRequest{NodeID: req.GetNodeId(), Addr: req.GetGrpcAddr(), Force: req.GetForce(), RateBytes: req.GetRateBytes()}
	switch req.GetKind() {
	case kvpb.ChangeRequest_ADD:
		cr.Kind = cluster.KindAdd
	case kvpb.ChangeRequest_REMOVE:
		cr.Kind = cluster.KindRemove
	case kvpb.ChangeRequest_REBALANCE:
		cr.Kind, cr.NodeID, cr.Addr = cluster.KindRebalance, "", ""
		cr.Tokens = cluster.TokenMovesFromProto(req.GetTokenMoves())
	default:
		return cr, fmt.Errorf("%w: change kind %v", cluster.ErrInvalidArgument, req.GetKind())
	}
	return cr, nil
}
