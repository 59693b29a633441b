package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"ringkv/node/peers"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

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

// pullPlan is one receiver pulling leaves from one source.
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
