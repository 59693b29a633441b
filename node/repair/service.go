package repair

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"ringkv/node/peers"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// Dialer reaches members' Replica and Admin services (this node's own included), with the
// cluster secret and TLS of the node's other internal calls. Safe for concurrent use.
type Dialer interface {
	Replica(addr string) (kvpb.ReplicaClient, error)
	Admin(addr string) (kvpb.AdminClient, error)
}

// Config is what the coordinating side of repair needs.
type Config struct {
	// Self is this node's id.
	Self string
	// View is the ring the node routes by (nil while awaiting admission). Lock-free.
	View func() *ring.View
	// Watch is closed at the next change of the view (cluster.Cluster.Watch); a session
	// stops when a ring change begins.
	Watch func() <-chan struct{}
	Dial  Dialer
	// DefaultRate is the streaming and tree-walk throttle of a session that asks for none,
	// bytes per second per replica (0 = unthrottled).
	DefaultRate uint64
	// Interval is the period of background repair of this node's primary ranges (0 = off),
	// jittered by ±10%; BackgroundRate its throttle.
	Interval       time.Duration
	BackgroundRate uint64
	// Parallel is how many ranges a session repairs at once (0 = 2).
	Parallel int
	// CallTimeout bounds each tree or pull call to a replica (0 = 10 minutes).
	CallTimeout time.Duration
	Now         func() time.Time
	Logger      *slog.Logger
}

// Service coordinates repair sessions on this node: plans, one session at a time, its
// progress, abort, and the background schedule. Safe for concurrent use.
type Service struct {
	cfg Config

	base   context.Context // sessions run under it; Run cancels it on the way out
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	cur    *session // running, else the last one; nil before the first
	nextID uint64
	notify chan struct{} // closed at every change of cur's progress
}

// NewService returns the coordinating side of repair; Run drives its background schedule
// and owns its sessions.
func NewService(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 2
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Minute
	}
	s := &Service{cfg: cfg, notify: make(chan struct{}), nextID: uint64(cfg.Now().Unix()) << 8}
	s.base, s.cancel = context.WithCancel(context.Background())
	return s
}

// session is one repair. Its fields below plan are guarded by Service.mu.
type session struct {
	id         uint64
	plan       *kvpb.RepairPlan
	work       []planned // per plan range
	cancel     context.CancelCauseFunc
	done       chan struct{}
	background bool

	state                                     kvpb.RepairState
	ranges                                    []*kvpb.RangeRepair
	started, finished                         time.Time
	keysStreamed, bytesStreamed, keysCompared uint64
	treeBytes                                 uint64
	err                                       string
}

// Plan computes what a repair would compare, with estimates, warnings and refusals.
func (s *Service) Plan(ctx context.Context, req *kvpb.RepairRequest) (*kvpb.RepairPlan, error) {
	p, _, err := s.plan(ctx, req, false)
	return p, err
}

// planned is what a session needs of each plan range beside the plan: its replicas, and
// the most records one of them holds (the trees' depth).
type planned struct {
	members []ring.Member
	keys    uint64
}

func rangesOf(members [][]ring.Member, most []uint64) []planned {
	out := make([]planned, len(members))
	for i := range members {
		out[i] = planned{members: members[i], keys: most[i]}
	}
	return out
}

func (s *Service) plan(ctx context.Context, req *kvpb.RepairRequest, primaryOnly bool) (*kvpb.RepairPlan, []planned, error) {
	plan := &kvpb.RepairPlan{Request: proto.Clone(req).(*kvpb.RepairRequest)}
	if plan.Request.RateBytes == 0 {
		plan.Request.RateBytes = s.cfg.DefaultRate
	}
	v := s.cfg.View()
	if v == nil || v.Current == nil {
		plan.Refusals = append(plan.Refusals, "this node is not in a ring yet")
		return plan, nil, nil
	}
	cur := v.Current
	plan.Epoch = cur.Epoch()
	if v.Changing() {
		plan.Refusals = append(plan.Refusals, fmt.Sprintf("ring change %d is in flight: repair once it commits or aborts", v.Change))
	}
	if id := req.GetNodeId(); id != "" {
		if _, ok := cur.Member(id); !ok {
			return nil, nil, fmt.Errorf("%w: node %q is not in the ring", ErrInvalidArgument, id)
		}
	}
	ranges := cur.Ranges()
	want := map[uint64]bool{}
	for _, t := range req.GetVnodes() {
		if !slices.ContainsFunc(ranges, func(r ring.Range) bool { return r.End == t }) {
			return nil, nil, fmt.Errorf("%w: no vnode with token %016x in the ring", ErrInvalidArgument, t)
		}
		want[t] = true
	}
	var members [][]ring.Member
	pairs := map[string]bool{}
	single := 0
	for _, r := range ranges {
		if len(want) > 0 && !want[r.End] {
			continue
		}
		reps := cur.Lookup(r.End, cur.Replicas())
		if id := req.GetNodeId(); id != "" && !slices.ContainsFunc(reps, func(m ring.Member) bool { return m.ID == id }) {
			continue
		}
		if primaryOnly && reps[0].ID != s.cfg.Self {
			continue
		}
		if len(reps) < 2 {
			single++
			continue
		}
		rr := &kvpb.RepairRange{Start: r.Start, End: r.End}
		for _, m := range reps {
			rr.Replicas = append(rr.Replicas, m.ID)
		}
		for i := range reps {
			for j := i + 1; j < len(reps); j++ {
				pairs[pairName(reps[i].ID, reps[j].ID)] = true
			}
		}
		plan.Ranges = append(plan.Ranges, rr)
		members = append(members, reps)
	}
	if single > 0 {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("%d ranges have a single replica: nothing to compare", single))
	}
	for p := range pairs {
		plan.Pairs = append(plan.Pairs, p)
	}
	sort.Strings(plan.Pairs)
	most := s.estimate(ctx, cur, plan, members)
	return plan, rangesOf(members, most), nil
}

// pairName is how a replica pair is named in plans and results: "a/b" with a < b.
func pairName(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return a + "/" + b
}

// estimate asks every member involved for the record counts of the ranges it holds
// (Admin.CountRanges, keys only): the primary's count is the plan's estimate, the largest
// replica's sizes the range's trees (a replica that missed everything must not make the
// trees coarse). A member that does not answer refuses the plan: its ranges could not be
// repaired. It returns the largest count per range.
func (s *Service) estimate(ctx context.Context, cur *ring.Ring, plan *kvpb.RepairPlan, members [][]ring.Member) []uint64 {
	byNode := map[string][]int{}
	for i, reps := range members {
		for _, m := range reps {
			byNode[m.ID] = append(byNode[m.ID], i)
		}
	}
	ids := make([]string, 0, len(byNode))
	for id := range byNode {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	counts := make([][]*kvpb.RangeCount, len(ids))
	for k, id := range ids {
		m, _ := cur.Member(id)
		wg.Go(func() {
			req := &kvpb.CountRangesRequest{}
			for _, i := range byNode[id] {
				req.Ranges = append(req.Ranges, &kvpb.TokenRange{Start: plan.Ranges[i].Start, End: plan.Ranges[i].End})
			}
			c, err := s.cfg.Dial.Admin(m.Addr)
			if err != nil {
				errs[k] = err
				return
			}
			cctx, cancel := context.WithTimeout(ctx, peers.DefaultTimeout)
			defer cancel()
			// WaitForReady: a connection still coming up (a node just started or restarted)
			// is waited for, up to the timeout, rather than taken for a node that is down.
			resp, err := c.CountRanges(cctx, req, grpc.WaitForReady(true))
			if err == nil && len(resp.GetCounts()) != len(req.Ranges) {
				err = fmt.Errorf("%d counts for %d ranges", len(resp.GetCounts()), len(req.Ranges))
			}
			errs[k], counts[k] = err, resp.GetCounts()
		})
	}
	wg.Wait()
	most := make([]uint64, len(members))
	for k, id := range ids {
		if errs[k] != nil {
			plan.Refusals = append(plan.Refusals, fmt.Sprintf("replica %s does not answer: %s", id, peers.ErrorLine(errs[k])))
			continue
		}
		for j, i := range byNode[id] {
			c := counts[k][j]
			most[i] = max(most[i], c.GetKeys())
			if members[i][0].ID != id {
				continue
			}
			rr := plan.Ranges[i]
			rr.EstKeys, rr.EstBytes = c.GetKeys(), c.GetBytes()
			plan.EstKeys += rr.EstKeys
			plan.EstBytes += rr.EstBytes
		}
	}
	return most
}

// Start plans a repair and starts it unless refused (ErrRefused, with the plan) or a
// session runs on this node already (ErrRunning). It returns once the session runs.
func (s *Service) Start(ctx context.Context, req *kvpb.RepairRequest) (*kvpb.RepairPlan, error) {
	return s.start(ctx, req, false)
}

func (s *Service) start(ctx context.Context, req *kvpb.RepairRequest, background bool) (*kvpb.RepairPlan, error) {
	if s.Running() {
		return nil, ErrRunning
	}
	plan, members, err := s.plan(ctx, req, background)
	if err != nil {
		return nil, err
	}
	if len(plan.Refusals) > 0 {
		return plan, fmt.Errorf("%w: %s", ErrRefused, strings.Join(plan.Refusals, "; "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.state == kvpb.RepairState_REPAIR_STATE_RUNNING {
		return nil, ErrRunning
	}
	if s.base.Err() != nil {
		return nil, fmt.Errorf("%w: node stopping", ErrRefused)
	}
	s.nextID++
	plan.Id = s.nextID
	ss := &session{
		id: plan.Id, plan: plan, work: members, done: make(chan struct{}), background: background,
		state: kvpb.RepairState_REPAIR_STATE_RUNNING, started: s.cfg.Now(),
	}
	for _, r := range plan.Ranges {
		ss.ranges = append(ss.ranges, &kvpb.RangeRepair{Range: r})
	}
	sctx, cancel := context.WithCancelCause(s.base)
	ss.cancel = cancel
	s.cur = ss
	s.changed()
	s.wg.Go(func() { s.run(sctx, ss) })
	s.cfg.Logger.Info("repair started", "id", ss.id, "ranges", len(plan.Ranges), "background", background,
		"est_keys", plan.EstKeys, "dry_run", plan.Request.GetDryRun())
	return proto.Clone(plan).(*kvpb.RepairPlan), nil
}

// changed wakes the watchers; the caller holds mu.
func (s *Service) changed() {
	close(s.notify)
	s.notify = make(chan struct{})
}

// Watch is closed at the next change of the progress (take it before reading Progress).
func (s *Service) Watch() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notify
}

// Running reports whether a session runs.
func (s *Service) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil && s.cur.state == kvpb.RepairState_REPAIR_STATE_RUNNING
}

// Abort stops the running session and returns its final progress (ErrNoRepair: none).
func (s *Service) Abort(ctx context.Context) (*kvpb.RepairProgress, error) {
	s.mu.Lock()
	ss := s.cur
	s.mu.Unlock()
	if ss == nil || !s.Running() {
		return nil, ErrNoRepair
	}
	ss.cancel(errors.New("aborted"))
	select {
	case <-ss.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Progress(), nil
}

// run repairs the session's ranges, Parallel at a time, and settles its state.
func (s *Service) run(ctx context.Context, ss *session) {
	defer close(ss.done)
	var watcher sync.WaitGroup
	defer watcher.Wait()
	defer ss.cancel(nil)
	watcher.Go(func() { s.stopOnRingChange(ctx, ss) })
	sem := make(chan struct{}, s.cfg.Parallel)
	var wg sync.WaitGroup
	for i := range ss.plan.Ranges {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			s.repairRange(ctx, ss, i)
		})
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.finished = s.cfg.Now()
	failed := 0
	for _, r := range ss.ranges {
		if r.State == kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED {
			failed++
		}
	}
	switch {
	case ctx.Err() != nil:
		ss.state = kvpb.RepairState_REPAIR_STATE_ABORTED
		ss.err = context.Cause(ctx).Error()
	case failed > 0:
		ss.state = kvpb.RepairState_REPAIR_STATE_FAILED
		ss.err = fmt.Sprintf("%d of %d ranges could not be repaired", failed, len(ss.ranges))
	default:
		ss.state = kvpb.RepairState_REPAIR_STATE_DONE
	}
	s.changed()
	s.cfg.Logger.Info("repair finished", "id", ss.id, "state", ss.state.String(), "keys_streamed", ss.keysStreamed,
		"bytes_streamed", ss.bytesStreamed, "keys_compared", ss.keysCompared, "tree_bytes", ss.treeBytes, "err", ss.err)
}

// stopOnRingChange cancels the session when a ring change begins or the epoch moves: the
// ranges and replicas it compares are no longer those of the ring.
func (s *Service) stopOnRingChange(ctx context.Context, ss *session) {
	for {
		var w <-chan struct{}
		if s.cfg.Watch != nil {
			w = s.cfg.Watch()
		}
		v := s.cfg.View()
		if v == nil || v.Current == nil || v.Changing() || v.Current.Epoch() != ss.plan.Epoch {
			ss.cancel(ErrRingChanged)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-w:
		case <-time.After(time.Second):
		}
	}
}

// setRange updates range i under mu and wakes the watchers.
func (s *Service) setRange(ss *session, i int, fn func(r *kvpb.RangeRepair)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(ss.ranges[i])
	s.changed()
}

// repairRange compares one range's replicas and has them pull what differs from each other.
func (s *Service) repairRange(ctx context.Context, ss *session, i int) {
	err := s.compareAndStream(ctx, ss, i)
	s.setRange(ss, i, func(r *kvpb.RangeRepair) {
		if err != nil {
			r.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED
			r.Error = err.Error()
			return
		}
		r.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE
	})
	if err != nil && ctx.Err() == nil {
		rr := ss.plan.Ranges[i]
		s.cfg.Logger.Warn("repair range", "id", ss.id, "range", fmtRange(rr.Start, rr.End), "err", err)
	}
}

func (s *Service) compareAndStream(ctx context.Context, ss *session, i int) error {
	rr, reps := ss.plan.Ranges[i], ss.work[i].members
	rate := ss.plan.Request.GetRateBytes()
	s.setRange(ss, i, func(r *kvpb.RangeRepair) { r.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_COMPARING })
	// Every record stamped before began and applied on a replica before its tree walk is in
	// that replica's tree: what MarkRepaired's purge relies on.
	began := s.cfg.Now()
	trees, compared, treeBytes, err := s.descend(ctx, reps, rr, ss.work[i].keys, rate, ss.plan.Epoch)
	s.mu.Lock()
	ss.treeBytes += treeBytes
	s.mu.Unlock()
	if err != nil {
		return err
	}
	// Compare every pair; a leaf that differs anywhere is settled below among all replicas.
	pairs := map[string]*kvpb.PairRepair{}
	var result []*kvpb.PairRepair
	union := map[uint32]bool{}
	for a := range reps {
		for b := a + 1; b < len(reps); b++ {
			d, err := Diff(trees[a], trees[b])
			if err != nil {
				return err
			}
			x, y := reps[a].ID, reps[b].ID
			if y < x {
				x, y = y, x
			}
			p := &kvpb.PairRepair{A: x, B: y, LeavesCompared: 1 << trees[0].Depth, LeavesMismatched: uint64(len(d))}
			pairs[pairName(x, y)] = p
			result = append(result, p)
			for _, l := range d {
				union[l.Index] = true
			}
		}
	}
	s.mu.Lock()
	ss.keysCompared += compared
	ss.ranges[i].Pairs = result
	s.changed()
	s.mu.Unlock()
	if ss.plan.Request.GetDryRun() {
		return nil
	}
	if len(union) > 0 {
		s.setRange(ss, i, func(r *kvpb.RangeRepair) { r.State = kvpb.RangeRepairState_RANGE_REPAIR_STATE_STREAMING })
		for _, pl := range pulls(trees, union) {
			recv, src := reps[pl.recv], reps[pl.src]
			res, err := s.pull(ctx, recv, src, trees[0].Spans(pl.leaves), rate, ss.plan.Epoch)
			if err != nil {
				return err
			}
			s.mu.Lock()
			p := pairs[pairName(recv.ID, src.ID)]
			if recv.ID == p.B {
				p.KeysToB += res.GetKeysApplied()
			} else {
				p.KeysToA += res.GetKeysApplied()
			}
			p.BytesStreamed += res.GetBytesReceived()
			ss.keysStreamed += res.GetKeysReceived()
			ss.bytesStreamed += res.GetBytesReceived()
			s.changed()
			s.mu.Unlock()
		}
	}
	// Every replica now holds every record any of them held when the trees were built.
	finished := s.cfg.Now()
	var merr []error
	for _, m := range reps {
		if err := s.mark(ctx, m, rr, began, finished, ss.plan.Epoch); err != nil {
			merr = append(merr, err)
		}
	}
	if err := errors.Join(merr...); err != nil {
		// The range is repaired; the replica that did not record it only keeps its
		// tombstones longer and reports an older last repair.
		s.cfg.Logger.Warn("repair mark", "range", fmtRange(rr.Start, rr.End), "err", err)
	}
	return nil
}

// pull is one receiver pulling leaves from one source.
type pullPlan struct {
	recv, src int
	leaves    []uint32
}

// pulls decides who pulls which differing leaves from whom. For each differing leaf, the
// replicas fall into groups of equal hashes; every replica outside a non-empty group pulls
// the leaf from that group's first replica (in ring order). So a replica missing records
// pulls them once, from one source, and a replica with an empty leaf sends nothing.
func pulls(trees []*Tree, union map[uint32]bool) []pullPlan {
	idx := make([]uint32, 0, len(union))
	for l := range union {
		idx = append(idx, l)
	}
	slices.Sort(idx)
	want := map[[2]int][]uint32{}
	for _, l := range idx {
		hashes := make([]uint64, len(trees))
		for k, t := range trees {
			if j, ok := slices.BinarySearchFunc(t.Leaves, l, func(x Leaf, l uint32) int { return int(int64(x.Index) - int64(l)) }); ok {
				hashes[k] = t.Leaves[j].Hash
			}
		}
		for src, h := range hashes {
			if h == 0 || slices.Index(hashes, h) != src {
				continue // empty, or not the first of its group
			}
			for recv, h2 := range hashes {
				if h2 != h {
					want[[2]int{recv, src}] = append(want[[2]int{recv, src}], l)
				}
			}
		}
	}
	out := make([]pullPlan, 0, len(want))
	for k, leaves := range want {
		out = append(out, pullPlan{recv: k[0], src: k[1], leaves: leaves})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].recv != out[j].recv {
			return out[i].recv < out[j].recv
		}
		return out[i].src < out[j].src
	})
	return out
}

// descend has every replica build its tree of the range and compares them in two steps:
// first the nodes of one level (about 8 records under each: SummaryLevel), then only the
// leaves under the nodes that differ between any two replicas. It returns, per replica, a
// tree holding those leaves (equal elsewhere by construction), and the records hashed.
func (s *Service) descend(ctx context.Context, reps []ring.Member, rr *kvpb.RepairRange, keys, rate, epoch uint64) (_ []*Tree, compared, treeBytes uint64, _ error) {
	depth := DepthFor(keys)
	level := SummaryLevel(depth, keys)
	sums := make([]*kvpb.RangeTreeResponse, len(reps))
	nodes := make([][]Node, len(reps))
	errs := make([]error, len(reps))
	var wg sync.WaitGroup
	for k, m := range reps {
		wg.Go(func() {
			sums[k], errs[k] = s.rangeTree(ctx, m, &kvpb.RangeTreeRequest{Start: rr.Start, End: rr.End, Depth: uint32(depth),
				Summary: true, Level: uint32(level), Epoch: epoch, RateBytes: rate})
			if errs[k] == nil {
				nodes[k], errs[k] = DecodeNodes(sums[k].GetNodes(), int(sums[k].GetLevel()))
			}
		})
	}
	wg.Wait()
	for _, sm := range sums {
		treeBytes += uint64(len(sm.GetNodes()))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, 0, treeBytes, err
	}
	for _, sm := range sums {
		compared += sm.GetKeys()
		if sm.GetDepth() != sums[0].GetDepth() || sm.GetLevel() != sums[0].GetLevel() {
			return nil, 0, treeBytes, fmt.Errorf("%w: depths %d and %d, levels %d and %d", ErrTreeMismatch,
				sums[0].GetDepth(), sm.GetDepth(), sums[0].GetLevel(), sm.GetLevel())
		}
	}
	differ := map[uint32]bool{}
	for a := range reps {
		for b := a + 1; b < len(reps); b++ {
			for _, n := range DiffNodes(nodes[a], nodes[b]) {
				differ[n] = true
			}
		}
	}
	under := make([]uint32, 0, len(differ))
	for n := range differ {
		under = append(under, n)
	}
	slices.Sort(under)
	// Always asked, with no nodes when all agree: the replicas then let their trees go.
	trees := make([]*Tree, len(reps))
	var mu sync.Mutex
	for k, m := range reps {
		wg.Go(func() {
			var resp *kvpb.RangeTreeResponse
			resp, errs[k] = s.rangeTree(ctx, m, &kvpb.RangeTreeRequest{Start: rr.Start, End: rr.End, TreeId: sums[k].GetTreeId(),
				Level: sums[k].GetLevel(), Subtrees: under, Epoch: epoch})
			if errs[k] != nil {
				return
			}
			mu.Lock()
			treeBytes += uint64(len(resp.GetLeaves()))
			mu.Unlock()
			var leaves []Leaf
			if leaves, errs[k] = DecodeLeaves(resp.GetLeaves(), int(sums[k].GetDepth())); errs[k] == nil {
				trees[k] = &Tree{Start: rr.Start, End: rr.End, Depth: int(sums[k].GetDepth()), Leaves: leaves, Keys: sums[k].GetKeys(), Bytes: sums[k].GetBytes()}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, treeBytes, err
	}
	return trees, compared, treeBytes, nil
}

func (s *Service) rangeTree(ctx context.Context, m ring.Member, req *kvpb.RangeTreeRequest) (*kvpb.RangeTreeResponse, error) {
	c, err := s.cfg.Dial.Replica(m.Addr)
	if err != nil {
		return nil, fmt.Errorf("tree from %s: %w", m.ID, err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	resp, err := c.RangeTree(cctx, req)
	if err != nil {
		return nil, fmt.Errorf("tree from %s: %s", m.ID, peers.ErrorLine(err))
	}
	return resp, nil
}

func (s *Service) pull(ctx context.Context, recv, src ring.Member, spans []Span, rate, epoch uint64) (*kvpb.PullRangesResponse, error) {
	c, err := s.cfg.Dial.Replica(recv.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s pulling from %s: %w", recv.ID, src.ID, err)
	}
	req := &kvpb.PullRangesRequest{SourceId: src.ID, SourceAddr: src.Addr, RateBytes: rate, Epoch: epoch}
	for _, sp := range spans {
		req.Spans = append(req.Spans, &kvpb.KeySpan{Start: sp.Start, End: sp.End})
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	resp, err := c.PullRanges(cctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s pulling from %s: %s", recv.ID, src.ID, peers.ErrorLine(err))
	}
	return resp, nil
}

func (s *Service) mark(ctx context.Context, m ring.Member, rr *kvpb.RepairRange, began, finished time.Time, epoch uint64) error {
	c, err := s.cfg.Dial.Replica(m.Addr)
	if err != nil {
		return fmt.Errorf("mark %s: %w", m.ID, err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	_, err = c.MarkRepaired(cctx, &kvpb.MarkRepairedRequest{
		Ranges:           []*kvpb.KeySpan{{Start: rr.Start, End: rr.End}},
		StartedUnixNanos: began.UnixNano(), FinishedUnixNanos: finished.UnixNano(), Epoch: epoch,
	})
	if err != nil {
		return fmt.Errorf("mark %s: %s", m.ID, peers.ErrorLine(err))
	}
	return nil
}

// Progress is the running session's progress, else the last one's; state NONE before the
// first.
func (s *Service) Progress() *kvpb.RepairProgress {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.cur
	if ss == nil {
		return &kvpb.RepairProgress{Coordinator: s.cfg.Self}
	}
	p := &kvpb.RepairProgress{
		Id: ss.id, State: ss.state, Plan: proto.Clone(ss.plan).(*kvpb.RepairPlan), Coordinator: s.cfg.Self,
		RangesTotal: uint32(len(ss.ranges)), KeysStreamed: ss.keysStreamed, BytesStreamed: ss.bytesStreamed,
		KeysCompared: ss.keysCompared, TreeBytes: ss.treeBytes, RateLimitBytes: ss.plan.Request.GetRateBytes(), Error: ss.err,
		StartedUnix: ss.started.Unix(),
	}
	if !ss.finished.IsZero() {
		p.FinishedUnix = ss.finished.Unix()
	}
	sum := map[string]*kvpb.PairRepair{}
	var doneBytes, totalBytes uint64
	for _, r := range ss.ranges {
		p.Ranges = append(p.Ranges, proto.Clone(r).(*kvpb.RangeRepair))
		est := r.GetRange().GetEstBytes() + 1
		totalBytes += est
		if r.State == kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE || r.State == kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED {
			p.RangesDone++
			doneBytes += est
		}
		for _, pr := range r.Pairs {
			t := sum[pairName(pr.A, pr.B)]
			if t == nil {
				t = &kvpb.PairRepair{A: pr.A, B: pr.B}
				sum[pairName(pr.A, pr.B)] = t
			}
			t.LeavesCompared += pr.LeavesCompared
			t.LeavesMismatched += pr.LeavesMismatched
			t.KeysToA += pr.KeysToA
			t.KeysToB += pr.KeysToB
			t.BytesStreamed += pr.BytesStreamed
		}
	}
	for _, name := range ss.plan.Pairs {
		if t := sum[name]; t != nil {
			p.Pairs = append(p.Pairs, t)
		}
	}
	end := ss.finished
	if end.IsZero() {
		end = s.cfg.Now()
	}
	if el := end.Sub(ss.started).Seconds(); el > 0 {
		p.RateBytesPerSec = float64(ss.bytesStreamed) / el
		if ss.state == kvpb.RepairState_REPAIR_STATE_RUNNING && doneBytes > 0 {
			frac := float64(doneBytes) / float64(totalBytes)
			p.EtaSeconds = el * (1 - frac) / frac
		}
	}
	return p
}

// Has reports whether this node has coordinated a session since it started.
func (s *Service) Has() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil
}

// Run repairs this node's primary ranges every Interval (±10%) until ctx ends, skipping a
// round while a ring change is in flight or a session runs; then it stops the running
// session and waits for it. Without an Interval it only waits.
func (s *Service) Run(ctx context.Context) error {
	defer func() {
		s.cancel()
		s.wg.Wait()
	}()
	if s.cfg.Interval <= 0 {
		<-ctx.Done()
		return nil
	}
	for {
		jitter := time.Duration((rand.Float64()*0.2 - 0.1) * float64(s.cfg.Interval))
		t := time.NewTimer(s.cfg.Interval + jitter)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if v := s.cfg.View(); v == nil || v.Changing() || s.Running() {
			continue
		}
		req := &kvpb.RepairRequest{RateBytes: s.cfg.BackgroundRate}
		if _, err := s.start(ctx, req, true); err != nil && !errors.Is(err, ErrRunning) {
			s.cfg.Logger.Info("background repair skipped", "err", err)
		}
	}
}
