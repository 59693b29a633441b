package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/node/cluster"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// ErrRefused: a ring change whose plan has refusals was started without force.
var ErrRefused = errors.New("ring change refused")

// Changes is the cluster's ring-change API (cluster.Cluster). Safe for concurrent use; the
// change calls forward to the raft leader.
type Changes interface {
	Plan(req cluster.ChangeRequest) (*cluster.Plan, error)
	Begin(ctx context.Context, req cluster.ChangeRequest) (*cluster.Change, error)
	Abort(ctx context.Context, changeID uint64) error
	SetRate(ctx context.Context, rateBytes uint64) error
	Change() *cluster.Change
	LastChange() *cluster.Change
	Watch() <-chan struct{}
}

var _ Changes = (*cluster.Cluster)(nil)

// RangeCounter counts the records a node stores in a token range (store.Store). Safe for
// concurrent use.
type RangeCounter interface {
	CountRange(start, end uint64) (keys, bytes uint64, err error)
}

type moveKey struct {
	start, end uint64
	target     string
}

type rangeCount struct{ keys, bytes uint64 }

func (s *Admin) changes() error {
	if s.d.Changes == nil {
		return fmt.Errorf("ring changes: %w", ErrUnimplemented)
	}
	return nil
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

// PlanChange computes what a change would do, with estimates, warnings and refusals.
func (s *Admin) PlanChange(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error) {
	if err := s.changes(); err != nil {
		return nil, GRPCError(err)
	}
	plan, _, err := s.plan(ctx, req)
	if err != nil {
		return nil, GRPCError(err)
	}
	return plan, nil
}

// StartChange plans a change and journals it unless the plan has refusals (force overrides
// those that forcing can help). It returns once the change is in flight.
func (s *Admin) StartChange(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error) {
	if err := s.changes(); err != nil {
		return nil, GRPCError(err)
	}
	plan, est, err := s.plan(ctx, req)
	if err != nil {
		return nil, GRPCError(err)
	}
	if len(plan.Refusals) > 0 && !req.GetForce() {
		return nil, GRPCError(fmt.Errorf("%w: %s", ErrRefused, strings.Join(plan.Refusals, "; ")))
	}
	if len(plan.Moves) == 0 && plan.GetFromEpoch() == plan.GetToEpoch() {
		return nil, GRPCError(fmt.Errorf("%w: nothing to move: %s", ErrRefused, strings.Join(plan.Warnings, "; ")))
	}
	cr, _ := changeRequest(plan.Request) // a rebalance's request now names its vnodes
	if cr.RateBytes == 0 {
		cr.RateBytes = s.d.DefaultRate
	}
	ch, err := s.d.Changes.Begin(ctx, cr)
	if err != nil {
		return nil, GRPCError(err)
	}
	s.estMu.Lock()
	s.est[ch.ID] = est
	s.estMu.Unlock()
	plan.Id = ch.ID
	plan.Request.RateBytes = cr.RateBytes
	return plan, nil
}

// plan builds the ChangePlan of req against this node's ring: the cluster's plan, the moves'
// estimated keys and bytes (asked of each move's source), ownership before and after, and
// warnings and refusals from the nodes' answers.
func (s *Admin) plan(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, map[moveKey]rangeCount, error) {
	var rbWarnings []string
	var measured, predicted map[string]float64
	if req.GetKind() == kvpb.ChangeRequest_REBALANCE {
		cur, _ := s.members()
		if cur == nil {
			return nil, nil, cluster.ErrNoRing
		}
		var full *kvpb.ChangeRequest
		var err error
		full, measured, predicted, err = s.planRebalance(ctx, cur, req, &rbWarnings)
		if err != nil {
			return nil, nil, err
		}
		if full == nil { // nothing worth moving: a plan without moves (StartChange refuses it)
			out := &kvpb.ChangePlan{Request: req, FromEpoch: cur.Epoch(), ToEpoch: cur.Epoch(), Warnings: rbWarnings}
			out.Before = ownership(cur, func(string) (uint64, uint64, bool) { return 0, 0, true })
			setLoad(out.Before, measured)
			out.After = out.Before
			return out, nil, nil
		}
		req = full
	}
	cr, err := changeRequest(req)
	if err != nil {
		return nil, nil, err
	}
	p, err := s.d.Changes.Plan(cr)
	if err != nil {
		return nil, nil, err
	}
	out := &kvpb.ChangePlan{
		Request: req, FromEpoch: p.Current.Epoch(), ToEpoch: p.Next.Epoch(),
		Warnings: append(rbWarnings, p.Warnings...), Refusals: append([]string(nil), p.Refusals...),
	}
	if rf := p.Next.ReplicationFactor(); p.Next.Replicas() < rf {
		out.Warnings = append(out.Warnings, fmt.Sprintf("fewer than %d distinct replicas after the change: %d nodes", rf, p.Next.Replicas()))
	}

	// Ask every member (and the newcomer) for its NodeInfo.
	members := p.Current.Members()
	if cr.Kind == cluster.KindAdd {
		members = append(members, ring.Member{ID: cr.NodeID, Addr: cr.Addr})
	}
	infos, errs := s.infos(ctx, members)
	info := map[string]*kvpb.NodeInfoResponse{}
	for i, m := range members {
		switch {
		case errs[i] == nil:
			info[m.ID] = infos[i]
		case cr.Kind == cluster.KindAdd && m.ID == cr.NodeID:
			out.Refusals = append(out.Refusals, fmt.Sprintf("%s at %s does not answer: %s", m.ID, m.Addr, oneLine(errs[i])))
		default:
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s at %s is unreachable: %s", m.ID, m.Addr, oneLine(errs[i])))
		}
	}
	if cr.Kind == cluster.KindAdd {
		if ni := info[cr.NodeID]; ni != nil {
			switch {
			case ni.GetId() != cr.NodeID:
				out.Refusals = append(out.Refusals, fmt.Sprintf("%s answers as %q, not %q", cr.Addr, ni.GetId(), cr.NodeID))
			case ni.GetEpoch() > 0:
				out.Refusals = append(out.Refusals, fmt.Sprintf("%s already has a ring (epoch %d): not an empty node", cr.NodeID, ni.GetEpoch()))
			case ni.GetKeys() > 0:
				out.Warnings = append(out.Warnings, fmt.Sprintf("%s already holds %d keys", cr.NodeID, ni.GetKeys()))
			}
		}
	}

	// Estimates: each source counts its moves' ranges.
	est := s.estimate(ctx, p.Current, p.Moves, &out.Warnings)
	need := map[string]uint64{}
	for _, m := range p.Moves {
		c := est[moveKey{m.Start, m.End, m.Target}]
		out.Moves = append(out.Moves, &kvpb.RangeMove{Start: m.Start, End: m.End, Source: m.Source, Target: m.Target, EstKeys: c.keys, EstBytes: c.bytes})
		out.EstKeys += c.keys
		out.EstBytes += c.bytes
		need[m.Target] += c.bytes
	}
	targets := make([]string, 0, len(need))
	for t := range need {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	for _, t := range targets {
		if ni := info[t]; ni != nil && ni.GetFreeDiskBytes() > 0 && ni.GetFreeDiskBytes() < need[t] {
			out.Refusals = append(out.Refusals, fmt.Sprintf("%s has %d bytes of free disk, below the %d it will receive", t, ni.GetFreeDiskBytes(), need[t]))
		}
	}

	// Ownership before (measured keys and bytes) and after (afterCounts: what each node holds
	// plus what the moves bring it, minus what it hands over).
	out.Before = ownership(p.Current, func(id string) (uint64, uint64, bool) {
		ni := info[id]
		return ni.GetKeys(), ni.GetDiskBytes(), ni != nil
	})
	after := afterCounts(p.Next, info, p.Moves, est)
	out.After = ownership(p.Next, func(id string) (uint64, uint64, bool) {
		c, ok := after[id]
		return c.keys, c.bytes, ok
	})
	if cr.Kind == cluster.KindRemove {
		out.After = append(out.After, &kvpb.NodeOwnership{Id: cr.NodeID, State: "REMOVED"})
	}
	setLoad(out.Before, measured)
	setLoad(out.After, predicted)
	return out, est, nil
}

// estimate asks each move's source (then the range's other replicas) to count its ranges.
func (s *Admin) estimate(ctx context.Context, cur *ring.Ring, moves []ring.Move, warnings *[]string) map[moveKey]rangeCount {
	bySource := map[string][]ring.Move{}
	for _, m := range moves {
		bySource[m.Source] = append(bySource[m.Source], m)
	}
	est := map[moveKey]rangeCount{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for src, ms := range bySource {
		wg.Go(func() {
			counts, err := s.countOn(ctx, cur, src, ms)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				*warnings = append(*warnings, fmt.Sprintf("no estimate from %s: %s", src, oneLine(err)))
				return
			}
			for i, m := range ms {
				est[moveKey{m.Start, m.End, m.Target}] = counts[i]
			}
		})
	}
	wg.Wait()
	sort.Strings(*warnings)
	return est
}

func (s *Admin) countOn(ctx context.Context, cur *ring.Ring, id string, ms []ring.Move) ([]rangeCount, error) {
	ranges := make([]*kvpb.TokenRange, len(ms))
	for i, m := range ms {
		ranges[i] = &kvpb.TokenRange{Start: m.Start, End: m.End}
	}
	var resp *kvpb.CountRangesResponse
	var err error
	if id == s.d.ID {
		resp, err = s.CountRanges(ctx, &kvpb.CountRangesRequest{Ranges: ranges})
	} else {
		m, ok := cur.Member(id)
		if !ok {
			return nil, fmt.Errorf("%w: %s", cluster.ErrUnknownMember, id)
		}
		c, derr := s.d.PeerAdmin(m.Addr)
		if derr != nil {
			return nil, derr
		}
		cctx, cancel := context.WithTimeout(ctx, 4*s.d.PeerTimeout)
		defer cancel()
		resp, err = c.CountRanges(cctx, &kvpb.CountRangesRequest{Ranges: ranges})
	}
	if err != nil {
		return nil, err
	}
	if len(resp.GetCounts()) != len(ms) {
		return nil, fmt.Errorf("count ranges: got %d counts, want %d", len(resp.GetCounts()), len(ms))
	}
	out := make([]rangeCount, len(ms))
	for i, c := range resp.GetCounts() {
		out[i] = rangeCount{c.GetKeys(), c.GetBytes()}
	}
	return out, nil
}

// ownership lists each member's vnodes and shares in r, with counts from counts.
func ownership(r *ring.Ring, counts func(id string) (keys, bytes uint64, ok bool)) []*kvpb.NodeOwnership {
	share, rshare := r.Ownership(), r.ReplicaOwnership()
	var out []*kvpb.NodeOwnership
	for _, m := range r.Members() {
		o := &kvpb.NodeOwnership{Id: m.ID, State: string(m.State), Vnodes: uint32(len(m.Tokens)), Share: share[m.ID], ReplicaShare: rshare[m.ID]}
		if k, b, ok := counts(m.ID); ok {
			o.Keys, o.Bytes = k, b
		} else {
			o.Error = "did not answer"
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return out
}

// CountRanges counts what this node stores in each range.
func (s *Admin) CountRanges(_ context.Context, req *kvpb.CountRangesRequest) (*kvpb.CountRangesResponse, error) {
	if s.d.Counter == nil {
		return nil, GRPCError(fmt.Errorf("count ranges: %w", ErrUnimplemented))
	}
	resp := &kvpb.CountRangesResponse{}
	for _, r := range req.GetRanges() {
		k, b, err := s.d.Counter.CountRange(r.GetStart(), r.GetEnd())
		if err != nil {
			return nil, GRPCError(fmt.Errorf("count range (%d, %d]: %w", r.GetStart(), r.GetEnd(), err))
		}
		resp.Counts = append(resp.Counts, &kvpb.RangeCount{Keys: k, Bytes: b})
	}
	return resp, nil
}

// ChangeStatus gathers the progress of the change in flight (or the last one) from every
// receiver; with local, only this node's own progress as a receiver.
func (s *Admin) ChangeStatus(ctx context.Context, req *kvpb.ChangeStatusRequest) (*kvpb.ChangeProgress, error) {
	if err := s.changes(); err != nil {
		return nil, GRPCError(err)
	}
	if req.GetLocal() {
		return s.localProgress(), nil
	}
	return s.progress(ctx), nil
}

// WatchChange pushes the progress every interval and at every state change until the change
// leaves flight (its final state is the last message).
func (s *Admin) WatchChange(req *kvpb.ChangeStatusRequest, stream kvpb.Admin_WatchChangeServer) error {
	if err := s.changes(); err != nil {
		return GRPCError(err)
	}
	every := time.Duration(req.GetIntervalMs()) * time.Millisecond
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	ctx := stream.Context()
	for {
		watch := s.d.Changes.Watch()
		p := s.progress(ctx)
		if err := stream.Send(p); err != nil {
			return err
		}
		if !inFlight(p.GetState()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.d.Draining:
			return status.Error(codes.Unavailable, "node is shutting down")
		case <-watch:
		case <-t.C:
		}
	}
}

func inFlight(state string) bool {
	return state == "streaming" || state == "handing-over" || state == "aborting"
}

// AbortChange cancels the change in flight and returns its final progress.
func (s *Admin) AbortChange(ctx context.Context, _ *kvpb.AbortChangeRequest) (*kvpb.ChangeProgress, error) {
	if err := s.changes(); err != nil {
		return nil, GRPCError(err)
	}
	if err := s.d.Changes.Abort(ctx, 0); err != nil {
		return nil, GRPCError(fmt.Errorf("abort: %w", err))
	}
	return s.progress(ctx), nil
}

// SetChangeRate changes the streaming throttle of the change in flight.
func (s *Admin) SetChangeRate(ctx context.Context, req *kvpb.SetChangeRateRequest) (*kvpb.ChangeProgress, error) {
	if err := s.changes(); err != nil {
		return nil, GRPCError(err)
	}
	if s.d.Changes.Change() == nil {
		return nil, GRPCError(cluster.ErrNoChange)
	}
	if err := s.d.Changes.SetRate(ctx, req.GetRateBytes()); err != nil {
		return nil, GRPCError(fmt.Errorf("set rate: %w", err))
	}
	return s.progress(ctx), nil
}

// current returns the change in flight, else the last one (nil if none), and whether it flies.
func (s *Admin) current() (*cluster.Change, bool) {
	if ch := s.d.Changes.Change(); ch != nil {
		return ch, true
	}
	return s.d.Changes.LastChange(), false
}

// localProgress is this node's progress on the moves of the current change that it receives.
func (s *Admin) localProgress() *kvpb.ChangeProgress {
	ch, _ := s.current()
	out := &kvpb.ChangeProgress{State: "none"}
	if ch == nil || s.d.MoveProgress == nil {
		return out
	}
	out.Id = ch.ID
	now := time.Now()
	for _, p := range s.d.MoveProgress() {
		if p.ChangeID != ch.ID {
			continue
		}
		rp := &kvpb.RangeProgress{
			Move:  &kvpb.RangeMove{Start: p.Move.Start, End: p.Move.End, Source: p.Move.Source, Target: p.Move.Target},
			State: p.State, KeysDone: p.Keys, BytesDone: p.Bytes, Error: p.Err, PullingFrom: p.Source,
		}
		end := now
		if p.State != cluster.MoveStreaming && !p.Finished.IsZero() {
			end = p.Finished
		}
		if d := end.Sub(p.Started).Seconds(); !p.Started.IsZero() && d > 0 {
			rp.RateBytesPerSec = float64(p.Bytes) / d
		}
		out.Ranges = append(out.Ranges, rp)
	}
	return out
}

// progress gathers the progress of the current change from every receiver.
func (s *Admin) progress(ctx context.Context) *kvpb.ChangeProgress {
	ch, flying := s.current()
	if ch == nil {
		return &kvpb.ChangeProgress{State: "none"}
	}
	out := &kvpb.ChangeProgress{Id: ch.ID, RateLimitBytes: ch.RateBytes, StartedUnix: ch.StartedUnix, FinishedUnix: ch.FinishedUnix}
	switch {
	case flying && ch.Pending() > 0:
		out.State = "streaming"
	case flying:
		out.State = "handing-over"
	case ch.Outcome == cluster.OutcomeCommitted:
		out.State = "done"
	case ch.Outcome == cluster.OutcomeAborted:
		out.State = "aborted"
	default:
		out.State = ch.Outcome
	}
	kind := kvpb.ChangeRequest_ADD
	switch ch.Kind {
	case cluster.KindRemove:
		kind = kvpb.ChangeRequest_REMOVE
	case cluster.KindRebalance:
		kind = kvpb.ChangeRequest_REBALANCE
	}
	out.Plan = &kvpb.ChangePlan{
		Id: ch.ID, FromEpoch: ch.FromEpoch, ToEpoch: ch.Next.Epoch,
		Request: &kvpb.ChangeRequest{Kind: kind, NodeId: ch.NodeID, GrpcAddr: ch.Addr, Force: ch.Force, RateBytes: ch.RateBytes,
			TokenMoves: cluster.TokenMovesToProto(ch.Tokens)},
	}

	est := s.changeEstimates(ctx, ch, flying)
	remote := s.receiverProgress(ctx, ch)
	var rate float64
	for i, mv := range ch.Moves {
		k := moveKey{mv.Start, mv.End, mv.Target}
		e := est[k]
		rp := &kvpb.RangeProgress{Move: &kvpb.RangeMove{Start: mv.Start, End: mv.End, Source: mv.Source, Target: mv.Target, EstKeys: e.keys, EstBytes: e.bytes}, State: cluster.MovePending}
		if got := remote[k]; got != nil {
			rp.State, rp.KeysDone, rp.BytesDone, rp.Error, rp.RateBytesPerSec, rp.PullingFrom = got.GetState(), got.GetKeysDone(), got.GetBytesDone(), got.GetError(), got.GetRateBytesPerSec(), got.GetPullingFrom()
		} else if errText, ok := remote[moveKey{target: mv.Target}]; ok {
			rp.Error = errText.GetError()
		}
		if mv.Done {
			rp.State = cluster.MoveDone
			rp.Error = ""
			if rp.KeysDone == 0 && rp.BytesDone == 0 {
				rp.KeysDone, rp.BytesDone = e.keys, e.bytes
			}
		}
		if rp.State == cluster.MoveStreaming {
			rate += rp.RateBytesPerSec
			if rp.RateBytesPerSec > 0 && e.bytes > rp.BytesDone {
				rp.EtaSeconds = float64(e.bytes-rp.BytesDone) / rp.RateBytesPerSec
			}
		}
		if rp.State == cluster.MoveFailed && out.Error == "" {
			out.Error = fmt.Sprintf("move %d to %s: %s", i, mv.Target, rp.Error)
		}
		out.Ranges = append(out.Ranges, rp)
		out.Plan.Moves = append(out.Plan.Moves, rp.Move)
		out.KeysDone += rp.KeysDone
		out.BytesDone += rp.BytesDone
		out.KeysTotal += max(e.keys, rp.KeysDone)
		out.BytesTotal += max(e.bytes, rp.BytesDone)
	}
	out.Plan.EstKeys, out.Plan.EstBytes = out.KeysTotal, out.BytesTotal
	if rate == 0 && ch.StartedUnix > 0 && flying {
		if d := time.Since(time.Unix(ch.StartedUnix, 0)).Seconds(); d > 0 {
			rate = float64(out.BytesDone) / d
		}
	}
	out.RateBytesPerSec = rate
	if rate > 0 && out.BytesTotal > out.BytesDone && flying {
		out.EtaSeconds = float64(out.BytesTotal-out.BytesDone) / rate
	}
	return out
}

// changeEstimates returns the cached estimates of ch's moves, counting them on the sources
// while the change flies and none are cached.
func (s *Admin) changeEstimates(ctx context.Context, ch *cluster.Change, flying bool) map[moveKey]rangeCount {
	s.estMu.Lock()
	est, ok := s.est[ch.ID]
	s.estMu.Unlock()
	if ok || !flying || s.d.View == nil {
		return est
	}
	v := s.d.View()
	if v == nil || v.Current == nil {
		return nil
	}
	moves := make([]ring.Move, len(ch.Moves))
	for i, m := range ch.Moves {
		moves[i] = ring.Move{Start: m.Start, End: m.End, Source: m.Source, Target: m.Target}
	}
	var warnings []string
	est = s.estimate(ctx, v.Current, moves, &warnings)
	if len(warnings) == 0 {
		s.estMu.Lock()
		for id := range s.est {
			if id < ch.ID {
				delete(s.est, id)
			}
		}
		s.est[ch.ID] = est
		s.estMu.Unlock()
	}
	return est
}

// receiverProgress asks every receiver of ch's moves for its own progress. A receiver that
// does not answer is reported under moveKey{target: id} with the error.
func (s *Admin) receiverProgress(ctx context.Context, ch *cluster.Change) map[moveKey]*kvpb.RangeProgress {
	addrs := map[string]string{}
	if s.d.View != nil {
		if v := s.d.View(); v != nil {
			for _, r := range []*ring.Ring{v.Current, v.Next} {
				if r == nil {
					continue
				}
				for _, m := range r.Members() {
					addrs[m.ID] = m.Addr
				}
			}
		}
	}
	for _, m := range ch.Next.Members {
		addrs[m.ID] = m.Addr
	}
	if ch.Addr != "" {
		addrs[ch.NodeID] = ch.Addr
	}
	targets := map[string]bool{}
	for _, mv := range ch.Moves {
		if !mv.Done {
			targets[mv.Target] = true
		}
	}
	out := map[moveKey]*kvpb.RangeProgress{}
	var mu sync.Mutex
	add := func(p *kvpb.ChangeProgress, target string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			out[moveKey{target: target}] = &kvpb.RangeProgress{Error: fmt.Sprintf("%s did not report: %s", target, oneLine(err))}
			return
		}
		if p.GetId() != ch.ID {
			return
		}
		for _, r := range p.GetRanges() {
			m := r.GetMove()
			out[moveKey{m.GetStart(), m.GetEnd(), m.GetTarget()}] = r
		}
	}
	var wg sync.WaitGroup
	for t := range targets {
		if t == s.d.ID {
			add(s.localProgress(), t, nil)
			continue
		}
		wg.Go(func() {
			c, err := s.d.PeerAdmin(addrs[t])
			if err != nil {
				add(nil, t, err)
				return
			}
			cctx, cancel := context.WithTimeout(ctx, s.d.PeerTimeout)
			defer cancel()
			p, err := c.ChangeStatus(cctx, &kvpb.ChangeStatusRequest{Local: true})
			add(p, t, err)
		})
	}
	wg.Wait()
	return out
}

// setLoad sets each node's load (a rebalance plan's measured or predicted ops/s).
func setLoad(os []*kvpb.NodeOwnership, load map[string]float64) {
	for _, o := range os {
		if l, ok := load[o.GetId()]; ok {
			o.Load = l
		}
	}
}

// afterCounts estimates each node's keys and bytes after a change: what it stores now (info),
// plus the estimated keys of every move it receives, minus those of every move it streams out
// of a range it no longer replicates in next. Bytes follow the node's bytes per key (they are
// on-disk bytes, the moves' estimates are key and value bytes); a node that stores nothing yet
// gets the moves' bytes. A node whose info is missing is left out.
func afterCounts(next *ring.Ring, info map[string]*kvpb.NodeInfoResponse, moves []ring.Move, est map[moveKey]rangeCount) map[string]rangeCount {
	delta := map[string]int64{}
	inBytes := map[string]uint64{}
	for _, m := range moves {
		c := est[moveKey{m.Start, m.End, m.Target}]
		delta[m.Target] += int64(c.keys)
		inBytes[m.Target] += c.bytes
		if !slices.ContainsFunc(next.Lookup(m.End, next.Replicas()), func(x ring.Member) bool { return x.ID == m.Source }) {
			delta[m.Source] -= int64(c.keys)
		}
	}
	out := map[string]rangeCount{}
	for id, ni := range info {
		if ni == nil {
			continue
		}
		keys := uint64(max(0, int64(ni.GetKeys())+delta[id]))
		var bytes uint64
		if ni.GetKeys() > 0 {
			bytes = uint64(math.Round(float64(ni.GetDiskBytes()) * float64(keys) / float64(ni.GetKeys())))
		} else {
			bytes = inBytes[id]
		}
		out[id] = rangeCount{keys: keys, bytes: bytes}
	}
	return out
}
