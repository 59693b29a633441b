package change

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"ringkv/node/cluster"
	"ringkv/node/peers"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// current returns the change in flight, else the last one (nil if none), and whether it flies.
func (s *Service) current() (*cluster.Change, bool) {
	if ch := s.cfg.Cluster.Change(); ch != nil {
		return ch, true
	}
	return s.cfg.Cluster.LastChange(), false
}

// LocalProgress is this node's progress on the moves of the current change that it receives.
func (s *Service) LocalProgress() *kvpb.ChangeProgress {
	ch, _ := s.current()
	out := &kvpb.ChangeProgress{State: kvpb.ChangeState_CHANGE_STATE_NONE}
	if ch == nil || s.cfg.Mover == nil {
		return out
	}
	out.Id = ch.ID
	if s.cfg.Paces != nil {
		out.Paces = s.cfg.Paces()
	}
	now := time.Now()
	for _, p := range s.cfg.Mover.Progress() {
		if p.ChangeID != ch.ID {
			continue
		}
		rp := &kvpb.RangeProgress{
			Move:  &kvpb.RangeMove{Start: p.Move.Start, End: p.Move.End, Source: p.Move.Source, Target: p.Move.Target},
			State: p.State, KeysDone: p.Keys, BytesDone: p.Bytes, Error: p.Err, PullingFrom: p.Source,
			ResumedFromBytes: p.ResumedFrom, RepulledBytes: p.Repulled, Stall: p.Stall,
		}
		if p.Stall != nil {
			out.StalledMoves++
		}
		out.ResumedFromBytes += p.ResumedFrom
		out.RepulledBytes += p.Repulled
		// The receiver's own estimate, from how far through the range its pull has come
		// (the move's estimate is the source's count, which this node does not know).
		if f := (ring.Move{Start: p.Move.Start, End: p.Move.End}).Covered(p.Position); f > 0 && p.State != cluster.MoveDone {
			rp.Move.EstKeys = uint64(math.Ceil(float64(p.Keys) / f))
			rp.Move.EstBytes = uint64(math.Ceil(float64(p.Bytes) / f))
		}
		end := now
		if p.State != cluster.MoveStreaming && !p.Finished.IsZero() {
			end = p.Finished
		}
		if d := end.Sub(p.Started).Seconds(); !p.Started.IsZero() && d > 0 && p.Bytes >= p.StartBytes {
			rp.RateBytesPerSec = float64(p.Bytes-p.StartBytes) / d
		}
		out.Ranges = append(out.Ranges, rp)
	}
	return out
}

// Progress gathers the progress of the current change from every receiver.
func (s *Service) Progress(ctx context.Context) *kvpb.ChangeProgress {
	ch, flying := s.current()
	if ch == nil {
		return &kvpb.ChangeProgress{State: kvpb.ChangeState_CHANGE_STATE_NONE}
	}
	out := &kvpb.ChangeProgress{Id: ch.ID, RateLimitBytes: ch.RateBytes, StartedUnix: ch.StartedUnix, FinishedUnix: ch.FinishedUnix}
	now := time.Now()
	switch {
	case flying && ch.Pending() > 0 && ch.Paused() != nil:
		out.State = kvpb.ChangeState_CHANGE_STATE_PAUSED
	case flying && ch.Pending() > 0:
		out.State = kvpb.ChangeState_CHANGE_STATE_STREAMING
	case flying:
		out.State = kvpb.ChangeState_CHANGE_STATE_HANDING_OVER
	case ch.Outcome == cluster.OutcomeCommitted:
		out.State = kvpb.ChangeState_CHANGE_STATE_DONE
	default: // cluster.OutcomeAborted, the only other outcome
		out.State = kvpb.ChangeState_CHANGE_STATE_ABORTED
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

	s.pace(out, ch, flying, now)

	est := s.changeEstimates(ctx, ch, flying)
	remote, paces := s.receiverProgress(ctx, ch)
	if flying {
		out.Paces = paces
	}
	var rate float64
	for i, mv := range ch.Moves {
		k := moveKey{mv.Start, mv.End, mv.Target}
		e := est[k]
		rp := &kvpb.RangeProgress{Move: &kvpb.RangeMove{Start: mv.Start, End: mv.End, Source: mv.Source, Target: mv.Target, EstKeys: e.keys, EstBytes: e.bytes}, State: cluster.MovePending}
		var byPosition rangeCount // the receiver's estimate from how far its pull has come
		if got := remote[k]; got != nil {
			rp.State, rp.KeysDone, rp.BytesDone, rp.Error, rp.RateBytesPerSec, rp.PullingFrom = got.GetState(), got.GetKeysDone(), got.GetBytesDone(), got.GetError(), got.GetRateBytesPerSec(), got.GetPullingFrom()
			rp.ResumedFromBytes, rp.RepulledBytes, rp.Stall = got.GetResumedFromBytes(), got.GetRepulledBytes(), got.GetStall()
			byPosition = rangeCount{got.GetMove().GetEstKeys(), got.GetMove().GetEstBytes()}
		} else if errText, ok := remote[moveKey{target: mv.Target}]; ok {
			rp.Error = errText.GetError()
		}
		if mv.Done {
			rp.State = cluster.MoveDone
			rp.Error, rp.Stall = "", nil
			if rp.KeysDone == 0 && rp.BytesDone == 0 {
				rp.KeysDone, rp.BytesDone = e.keys, e.bytes
			}
			// What was pulled is what there was: the estimate is corrected to it.
			e = rangeCount{rp.KeysDone, rp.BytesDone}
		} else {
			e = remaining(e, byPosition, rp.KeysDone, rp.BytesDone)
		}
		rp.Move.EstKeys, rp.Move.EstBytes = e.keys, e.bytes
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
		if rp.Stall != nil {
			out.StalledMoves++
		}
		out.ResumedFromBytes += rp.ResumedFromBytes
		out.RepulledBytes += rp.RepulledBytes
		out.KeysTotal += e.keys
		out.BytesTotal += e.bytes
	}
	out.Plan.EstKeys, out.Plan.EstBytes = out.KeysTotal, out.BytesTotal
	if rate == 0 && ch.StartedUnix > 0 && flying {
		// Over the time the change streamed: its pauses left out.
		if d := (now.Sub(time.Unix(ch.StartedUnix, 0)) - ch.PausedFor(now)).Seconds(); d > 0 {
			rate = float64(out.BytesDone) / d
		}
	}
	out.RateBytesPerSec = rate
	if rate > 0 && out.BytesTotal > out.BytesDone && flying {
		out.EtaSeconds = float64(out.BytesTotal-out.BytesDone) / rate
	}
	return out
}

// pace fills in what governs the change's streaming: its pauses and the time spent in them,
// the parallel and per-node throttles, and the pending replicas every write waits for.
func (s *Service) pace(out *kvpb.ChangeProgress, ch *cluster.Change, flying bool, now time.Time) {
	for _, p := range ch.Pauses {
		out.Pauses = append(out.Pauses, &kvpb.ChangePause{By: p.By, Reason: p.Reason, PausedUnix: p.Unix, ResumedUnix: p.ResumedUnix, ResumedBy: p.ResumedBy})
	}
	end := now
	if !flying && ch.FinishedUnix > 0 {
		end = time.Unix(ch.FinishedUnix, 0)
	}
	out.PausedSeconds = ch.PausedFor(end).Seconds()
	out.Parallel = uint32(max(ch.Parallel, 0))
	for _, id := range slices.Sorted(maps.Keys(ch.NodeRates)) {
		out.NodeRates = append(out.NodeRates, &kvpb.NodeRate{NodeId: id, RateBytes: ch.NodeRates[id]})
	}
	if flying && s.cfg.View != nil {
		if v := s.cfg.View(); v != nil {
			out.PendingReplicas = uint32(PendingReplicas(v))
		}
	}
}

// PendingReplicas is the most pending replicas any key's write waits for beyond its ack in
// view v (0 when no change is in flight): the replicas of the next ring among a key's first N
// that are not among the current ring's.
func PendingReplicas(v *ring.View) int {
	if v == nil || v.Current == nil || v.Next == nil {
		return 0
	}
	most := 0
	n := v.Current.ReplicationFactor()
	for _, r := range []*ring.Ring{v.Current, v.Next} {
		for _, rg := range r.Ranges() {
			_, pending := v.WriteSet(rg.End, n)
			most = max(most, len(pending))
		}
	}
	return most
}

// remaining is the estimate of a move not done yet, given what its receiver pulled so far
// (keys, bytes): the source's count while the pull stays below it; once the pull reaches it,
// the count was wrong and the receiver's estimate from its position in the range replaces it;
// and always more than was pulled, so that a move in flight never reads complete.
func remaining(est, byPosition rangeCount, keys, bytes uint64) rangeCount {
	if keys >= est.keys {
		est.keys = max(byPosition.keys, keys+1)
	}
	if bytes >= est.bytes {
		est.bytes = max(byPosition.bytes, bytes+1)
	}
	return est
}

// changeEstimates returns the cached estimates of ch's moves, counting them on the sources
// while the change flies and none are cached.
func (s *Service) changeEstimates(ctx context.Context, ch *cluster.Change, flying bool) map[moveKey]rangeCount {
	s.estMu.Lock()
	est, ok := s.est[ch.ID]
	s.estMu.Unlock()
	if ok || !flying || s.cfg.View == nil {
		return est
	}
	v := s.cfg.View()
	if v == nil || v.Current == nil {
		return nil
	}
	moves := make([]ring.Move, len(ch.Moves))
	for i, m := range ch.Moves {
		moves[i] = ring.Move{Start: m.Start, End: m.End, Source: m.Source, Target: m.Target}
	}
	var warnings []string
	est = s.estimate(ctx, v.Current, moves, nil, &warnings)
	if len(est) == len(moves) { // every move estimated, by its source or another replica
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

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

// receiverProgress asks every receiver of ch's moves for its own progress, and every node
// streaming them (receivers and sources) for its paces. A receiver that does not answer is
// reported under moveKey{target: id} with the error.
func (s *Service) receiverProgress(ctx context.Context, ch *cluster.Change) (map[moveKey]*kvpb.RangeProgress, []*kvpb.Pace) {
	addrs := map[string]string{}
	if s.cfg.View != nil {
		if v := s.cfg.View(); v != nil {
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
	targets := map[string]bool{} // true: a receiver; false: a source only
	for _, mv := range ch.Moves {
		if !mv.Done {
			targets[mv.Target] = true
			if _, ok := targets[mv.Source]; !ok {
				targets[mv.Source] = false
			}
		}
	}
	out := map[moveKey]*kvpb.RangeProgress{}
	var paces []*kvpb.Pace
	var mu sync.Mutex
	add := func(p *kvpb.ChangeProgress, target string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil && p.GetId() == ch.ID {
			paces = append(paces, p.GetPaces()...)
		}
		if !targets[target] {
			return // a source: its paces alone
		}
		if err != nil {
			out[moveKey{target: target}] = &kvpb.RangeProgress{Error: fmt.Sprintf("%s did not report: %s", target, peers.ErrorLine(err))}
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
		if t == s.cfg.Peers.Self {
			add(s.LocalProgress(), t, nil)
			continue
		}
		wg.Go(func() {
			c, err := s.cfg.Peers.Dial.Admin(addrs[t])
			if err != nil {
				add(nil, t, err)
				return
			}
			cctx, cancel := context.WithTimeout(ctx, s.cfg.Peers.CallTimeout())
			defer cancel()
			p, err := c.ChangeStatus(cctx, &kvpb.ChangeStatusRequest{Local: true})
			add(p, t, err)
		})
	}
	wg.Wait()
	// By node, its pulls before the ranges it serves.
	slices.SortFunc(paces, func(a, b *kvpb.Pace) int {
		return cmp.Or(cmp.Compare(a.GetNodeId(), b.GetNodeId()), cmpBool(a.GetSending(), b.GetSending()))
	})
	return out, paces
}
