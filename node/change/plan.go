package change

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"ringkv/node/cluster"
	"ringkv/node/peers"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// plan builds the ChangePlan of req against this node's ring: the cluster's plan, the moves'
// estimated keys and bytes (asked of each move's source), ownership before and after, and
// warnings and refusals from the nodes' answers, and the load prediction a started change
// journals.
func (s *Service) plan(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, map[moveKey]rangeCount, copies, *cluster.Prediction, error) {
	var rbWarnings []string
	var measured, predicted map[string]float64
	if req.GetKind() == kvpb.ChangeRequest_REBALANCE {
		cur, _ := peers.Members(s.cfg.View())
		if cur == nil {
			return nil, nil, copies{}, nil, cluster.ErrNoRing
		}
		var full *kvpb.ChangeRequest
		var err error
		full, measured, predicted, err = s.planRebalance(ctx, cur, req, &rbWarnings)
		if err != nil {
			return nil, nil, copies{}, nil, err
		}
		if full == nil { // nothing worth moving: a plan without moves (StartChange refuses it)
			out := &kvpb.ChangePlan{Request: req, FromEpoch: cur.Epoch(), ToEpoch: cur.Epoch(), Warnings: rbWarnings}
			// The nodes' measured keys, as in any plan (they read 0 before).
			members := cur.Members()
			infos, errs := peers.Infos(ctx, s.cfg.Peers, members, s.cfg.Info)
			out.Before = ownership(cur, func(id string) (uint64, uint64, bool) {
				i := slices.IndexFunc(members, func(m ring.Member) bool { return m.ID == id })
				if i < 0 || errs[i] != nil {
					return 0, 0, false
				}
				return infos[i].GetKeys(), infos[i].GetDiskBytes(), true
			})
			setLoad(out.Before, measured)
			out.After = out.Before
			return out, nil, copies{}, nil, nil
		}
		req = full
	}
	cr, err := changeRequest(req)
	if err != nil {
		return nil, nil, copies{}, nil, err
	}
	p, err := s.cfg.Cluster.Plan(cr)
	if err != nil {
		return nil, nil, copies{}, nil, err
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
	infos, errs := peers.Infos(ctx, s.cfg.Peers, members, s.cfg.Info)
	info := map[string]*kvpb.NodeInfoResponse{}
	dead := map[string]bool{}
	for i, m := range members {
		switch {
		case errs[i] == nil:
			info[m.ID] = infos[i]
		case cr.Kind == cluster.KindAdd && m.ID == cr.NodeID:
			out.Refusals = append(out.Refusals, fmt.Sprintf("%s at %s does not answer: %s", m.ID, m.Addr, peers.ErrorLine(errs[i])))
		case cr.Kind == cluster.KindRemove && m.ID == cr.NodeID:
			dead[m.ID] = true
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s at %s does not answer (%s): its ranges are rebuilt from the other replicas", m.ID, m.Addr, peers.ErrorLine(errs[i])))
		default:
			dead[m.ID] = true
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s at %s is unreachable: %s", m.ID, m.Addr, peers.ErrorLine(errs[i])))
		}
	}
	cp := liveCopies(p.Current, p.Moves, dead)
	out.Refusals = append(out.Refusals, cp.refusals()...)
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
	est := s.estimate(ctx, p.Current, p.Moves, dead, &out.Warnings)
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
		out.After = append(out.After, &kvpb.NodeOwnership{Id: cr.NodeID, State: kvpb.NodeState_NODE_STATE_REMOVED})
	}
	setLoad(out.Before, measured)
	setLoad(out.After, predicted)
	if measured == nil { // an add, a remove, or a rebalance that named its vnodes
		measured, predicted = s.predictLoads(ctx, p.Current, p.Next)
	}
	return out, est, cp, s.prediction(measured, predicted, out.EstBytes), nil
}

// estimate asks each move's source to count its range or, when the source is dead or does not
// answer, the range's other replicas in turn (dead: members known not to answer).
func (s *Service) estimate(ctx context.Context, cur *ring.Ring, moves []ring.Move, dead map[string]bool, warnings *[]string) map[moveKey]rangeCount {
	est := map[moveKey]rangeCount{}
	tried := make([]int, len(moves)) // per move: candidates tried so far
	failed := map[string]error{}
	pending := make([]int, len(moves))
	for i := range moves {
		pending[i] = i
	}
	for len(pending) > 0 {
		bySource := map[string][]int{}
		var srcs []string
		for _, i := range pending {
			cands := candidates(cur, moves[i])
			for tried[i] < len(cands) && (dead[cands[tried[i]]] || failed[cands[tried[i]]] != nil) {
				tried[i]++
			}
			if tried[i] == len(cands) {
				continue // no replica of the range answers: no estimate
			}
			src := cands[tried[i]]
			tried[i]++
			if _, ok := bySource[src]; !ok {
				srcs = append(srcs, src)
			}
			bySource[src] = append(bySource[src], i)
		}
		var asks []peers.Count
		var asked []string
		for _, src := range srcs {
			m, ok := cur.Member(src)
			if !ok {
				failed[src] = fmt.Errorf("%w: %s", cluster.ErrUnknownMember, src)
				continue
			}
			a := peers.Count{Member: m}
			for _, i := range bySource[src] {
				a.Ranges = append(a.Ranges, &kvpb.TokenRange{Start: moves[i].Start, End: moves[i].End})
			}
			asks, asked = append(asks, a), append(asked, src)
		}
		counts, errs := peers.CountRanges(ctx, s.cfg.Peers, asks, s.CountRanges)
		var rest []int
		for _, src := range srcs {
			if failed[src] != nil {
				rest = append(rest, bySource[src]...)
			}
		}
		for k, src := range asked {
			if errs[k] != nil {
				failed[src] = errs[k]
				rest = append(rest, bySource[src]...)
				continue
			}
			for j, i := range bySource[src] {
				m, c := moves[i], counts[k][j]
				est[moveKey{m.Start, m.End, m.Target}] = rangeCount{c.GetKeys(), c.GetBytes()}
			}
		}
		pending = rest
	}
	for src, err := range failed {
		if !dead[src] {
			*warnings = append(*warnings, fmt.Sprintf("no estimate from %s: %s", src, peers.ErrorLine(err)))
		}
	}
	missing := 0
	for _, m := range moves {
		if _, ok := est[moveKey{m.Start, m.End, m.Target}]; !ok {
			missing++
		}
	}
	if missing > 0 {
		*warnings = append(*warnings, fmt.Sprintf("no estimate for %d of %d moves: no replica of their ranges answered", missing, len(moves)))
	}
	sort.Strings(*warnings)
	return est
}

// ownership lists each member's vnodes and shares in r, with counts from counts.
func ownership(r *ring.Ring, counts func(id string) (keys, bytes uint64, ok bool)) []*kvpb.NodeOwnership {
	share, rshare := r.Ownership(), r.ReplicaOwnership()
	var out []*kvpb.NodeOwnership
	for _, m := range r.Members() {
		o := &kvpb.NodeOwnership{Id: m.ID, State: m.State.Proto(), Vnodes: uint32(len(m.Tokens)), Share: share[m.ID], ReplicaShare: rshare[m.ID]}
		if k, b, ok := counts(m.ID); ok {
			o.Keys, o.Bytes = k, b
		} else {
			o.Error = "did not answer"
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *kvpb.NodeOwnership) int { return cmp.Compare(a.Id, b.Id) })
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
