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
	"time"

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
	SetRate(ctx context.Context, nodeID string, rateBytes uint64) error
	SetParallel(ctx context.Context, parallel int) error
	Pause(ctx context.Context, by, reason string) error
	Resume(ctx context.Context, by string) error
	Change() *cluster.Change
	LastChange() *cluster.Change
	History(limit int, id uint64) ([]cluster.ChangeRecord, error)
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
	// PredictionDelay after a change commits, its load is observed for PredictionWindow and
	// compared with the plan's prediction (0 window: not observed).
	PredictionDelay, PredictionWindow time.Duration
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
	plan, _, _, _, err := s.plan(ctx, req)
	return plan, err
}

// Start plans a change and journals it unless the plan has refusals (force overrides those
// that forcing can help) or nothing to move (ErrRefused). It returns once the change is in
// flight. A forced change gives up at once on the moves that cannot happen while nodes are
// down (no live replica of the range, or a receiver that does not answer): it records them
// done, so that the change completes without those nodes.
func (s *Service) Start(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error) {
	plan, est, cp, pred, err := s.plan(ctx, req)
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
	cr.By, cr.Prediction = req.GetBy(), pred
	ch, err := s.cfg.Cluster.Begin(ctx, cr)
	if err != nil {
		return nil, err
	}
	var giveUp []int
	for i, mv := range ch.Moves {
		m := ring.Move{Start: mv.Start, End: mv.End, Source: mv.Source, Target: mv.Target}
		if !cp.skipped(m) || mv.Done {
			continue
		}
		// Nothing will be streamed for it: its progress counts nothing.
		est[moveKey{m.Start, m.End, m.Target}] = rangeCount{}
		giveUp = append(giveUp, i)
	}
	if err := s.giveUp(ctx, ch, giveUp); err != nil {
		return nil, err
	}
	s.estMu.Lock()
	s.est[ch.ID] = est
	s.estMu.Unlock()
	plan.Id = ch.ID
	plan.Request.RateBytes = cr.RateBytes
	return plan, nil
}

// giveUpAtOnce is how many of a forced change's moves giveUp records at once.
const giveUpAtOnce = 16

// giveUp records the moves of ch numbered in moves done, several at once: each is a raft
// write, and one after another they outlasted the caller's deadline when the live voters were
// slow (two of five down on a loaded machine: move 56 of 88 at the deadline), leaving the
// change in flight and the call failed.
func (s *Service) giveUp(ctx context.Context, ch *cluster.Change, moves []int) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, giveUpAtOnce)
	for _, i := range moves {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.cfg.Cluster.MoveDone(ctx, ch.ID, i); err != nil {
				mv := ch.Moves[i]
				m := ring.Move{Start: mv.Start, End: mv.End, Source: mv.Source, Target: mv.Target}
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("give up move %d (%s) of change %d: %w", i, m, ch.ID, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// Abort cancels the change in flight and returns its final progress.
func (s *Service) Abort(ctx context.Context) (*kvpb.ChangeProgress, error) {
	if err := s.cfg.Cluster.Abort(ctx, 0); err != nil {
		return nil, fmt.Errorf("abort: %w", err)
	}
	return s.Progress(ctx), nil
}

// SetRate changes the streaming throttle of the change in flight, or with nodeID that of one
// receiver, and returns its progress. A rate of 0 is refused unless unlimited (it would read
// as "stream nothing", which is what Pause does). cluster.ErrNoChange when none flies,
// cluster.ErrUnknownMember for a node in neither ring.
func (s *Service) SetRate(ctx context.Context, nodeID string, rateBytes uint64, unlimited bool) (*kvpb.ChangeProgress, error) {
	switch {
	case unlimited && rateBytes != 0:
		return nil, fmt.Errorf("%w: a rate and unlimited together", cluster.ErrInvalidArgument)
	case !unlimited && rateBytes == 0:
		return nil, fmt.Errorf("%w: rate 0: pause the change to stop it streaming, or ask for unlimited to lift the throttle", cluster.ErrInvalidArgument)
	}
	if s.cfg.Cluster.Change() == nil {
		return nil, cluster.ErrNoChange
	}
	if err := s.cfg.Cluster.SetRate(ctx, nodeID, rateBytes); err != nil {
		return nil, fmt.Errorf("set rate: %w", err)
	}
	return s.Progress(ctx), nil
}

// SetParallel sets the pulls at once per receiver of the change in flight (at least 1) and
// returns its progress.
func (s *Service) SetParallel(ctx context.Context, parallel int) (*kvpb.ChangeProgress, error) {
	if parallel < 1 {
		return nil, fmt.Errorf("%w: parallel %d: want at least 1 pull per receiver", cluster.ErrInvalidArgument, parallel)
	}
	if s.cfg.Cluster.Change() == nil {
		return nil, cluster.ErrNoChange
	}
	if err := s.cfg.Cluster.SetParallel(ctx, parallel); err != nil {
		return nil, fmt.Errorf("set parallel: %w", err)
	}
	return s.Progress(ctx), nil
}

// MaxPauseReason bounds the reason of a pause, in bytes: raft journals it.
const MaxPauseReason = 256

// Pause stops the change in flight, journaled with who and why, and returns its progress:
// cluster.ErrNothingToPause when no range streams, cluster.ErrAlreadyPaused.
func (s *Service) Pause(ctx context.Context, by, reason string) (*kvpb.ChangeProgress, error) {
	if len(reason) > MaxPauseReason {
		return nil, fmt.Errorf("%w: a pause reason of %d bytes: at most %d", cluster.ErrInvalidArgument, len(reason), MaxPauseReason)
	}
	if err := s.cfg.Cluster.Pause(ctx, by, reason); err != nil {
		return nil, fmt.Errorf("pause: %w", err)
	}
	return s.Progress(ctx), nil
}

// Resume lets the paused change stream again and returns its progress (cluster.ErrNotPaused).
func (s *Service) Resume(ctx context.Context, by string) (*kvpb.ChangeProgress, error) {
	if err := s.cfg.Cluster.Resume(ctx, by); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
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
