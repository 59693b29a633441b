package latency

import (
	"cmp"
	"slices"

	"ringkv/proto/kvpb"
)

// Snapshot returns the windows that ended with the last complete slice: every vnode and peer
// with an operation or a call in the long window.
func (t *Tracker) Snapshot(node string) *kvpb.VnodesResponse {
	now := t.sliceOf(t.cfg.Now()) // the slice in progress: not in the windows
	resp := &kvpb.VnodesResponse{
		Node:              node,
		EndUnixNanos:      now * int64(SliceLen),
		SliceSeconds:      uint32(SliceLen.Seconds()),
		WindowSeconds:     uint32((ShortSlices * SliceLen).Seconds()),
		LongWindowSeconds: uint32((LongSlices * SliceLen).Seconds()),
	}
	if vt := t.vt.Load(); vt != nil {
		for i := range vt.v {
			v := vt.v[i].Load()
			if v == nil {
				continue
			}
			vl := &kvpb.VnodeLatency{
				Token: vt.ends[i], Start: vt.starts[i],
				Reads_10S: merged(v.reads[:], now, ShortSlices), Writes_10S: merged(v.writes[:], now, ShortSlices),
				Reads_1M: merged(v.reads[:], now, LongSlices), Writes_1M: merged(v.writes[:], now, LongSlices),
			}
			if vl.GetReads_1M().Count() == 0 && vl.GetWrites_1M().Count() == 0 {
				continue
			}
			if rs := v.replicas.Load(); rs != nil {
				for _, r := range *rs {
					if h := merged(r.calls[:], now, ShortSlices); h.Count() > 0 {
						vl.Replicas = append(vl.Replicas, &kvpb.ReplicaLatency{Node: r.id, Calls_10S: h})
					}
				}
				slices.SortFunc(vl.Replicas, func(a, b *kvpb.ReplicaLatency) int { return cmp.Compare(a.GetNode(), b.GetNode()) })
			}
			resp.Vnodes = append(resp.Vnodes, vl)
		}
	}
	resp.Peers = t.peersAt(now)
	return resp
}

// Peers returns what the coordinator saw of each peer with a call, a hedge or a trip in the
// long window, by node.
func (t *Tracker) Peers() []*kvpb.PeerLatency { return t.peersAt(t.sliceOf(t.cfg.Now())) }

func (t *Tracker) peersAt(now int64) []*kvpb.PeerLatency {
	var out []*kvpb.PeerLatency
	t.peersMu.RLock()
	for id, p := range t.peers {
		pl := &kvpb.PeerLatency{
			Node:      id,
			Calls_10S: merged(p.calls[:], now, ShortSlices), Calls_1M: merged(p.calls[:], now, LongSlices),
			Timeouts_10S: sum(p.timeouts[:], now, ShortSlices), Timeouts_1M: sum(p.timeouts[:], now, LongSlices),
			Hedges_10S: sum(p.hedges[:], now, ShortSlices), Hedges_1M: sum(p.hedges[:], now, LongSlices),
			BreakerTrips_10S: sum(p.trips[:], now, ShortSlices), BreakerTrips_1M: sum(p.trips[:], now, LongSlices),
		}
		if pl.GetCalls_1M().Count() == 0 && pl.GetHedges_1M() == 0 && pl.GetBreakerTrips_1M() == 0 {
			continue
		}
		out = append(out, pl)
	}
	t.peersMu.RUnlock()
	slices.SortFunc(out, func(a, b *kvpb.PeerLatency) int { return cmp.Compare(a.GetNode(), b.GetNode()) })
	return out
}

// merged adds the n complete slices before the slice now.
func merged(slots []slot, now int64, n int) *kvpb.LatencyHistogram {
	var dense [kvpb.LatencyBuckets]uint64
	var maxUS, errs, stalled uint64
	for i := range slots {
		s := &slots[i]
		if e := s.epoch.Load(); e >= now || e < now-int64(n) {
			continue
		}
		for j := range s.counts {
			dense[j] += uint64(s.counts[j].Load())
		}
		maxUS = max(maxUS, uint64(s.maxUS.Load()))
		errs += uint64(s.errors.Load())
		stalled += s.stalledUS.Load()
	}
	h := kvpb.NewLatencyHistogram(dense[:], maxUS, errs)
	h.StalledUs = stalled
	return h
}

func sum(cs []counter, now int64, n int) uint64 {
	var total uint64
	for i := range cs {
		if e := cs[i].epoch.Load(); e < now && e >= now-int64(n) {
			total += uint64(cs[i].n.Load())
		}
	}
	return total
}
