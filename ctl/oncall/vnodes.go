package oncall

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"time"

	"ringkv/proto/kvpb"
)

// ReplicaLatency is what the coordinators saw of their calls to one replica of a vnode over the
// short window. Percentiles over fewer than kvpb.MinLatencySamples calls are null.
type ReplicaLatency struct {
	Node  string   `json:"node"`
	Calls uint64   `json:"calls"`
	P50Ms *float64 `json:"p50_ms"`
	P99Ms *float64 `json:"p99_ms"`
}

// Vnode is one vnode of the merged answer (kvctl vnodes -o json: the objects of "vnodes").
type Vnode struct {
	Vnode     string   `json:"vnode"`
	Range     string   `json:"range"`
	Owner     string   `json:"owner"`
	Replicas  []string `json:"replicas"`
	OpsPerSec float64  `json:"ops_per_sec"`
	Reads     uint64   `json:"reads"`
	Writes    uint64   `json:"writes"`
	// Percentiles over fewer than kvpb.MinLatencySamples operations are null.
	ReadP50Ms  *float64 `json:"read_p50_ms"`
	ReadP99Ms  *float64 `json:"read_p99_ms"`
	WriteP50Ms *float64 `json:"write_p50_ms"`
	WriteP99Ms *float64 `json:"write_p99_ms"`
	MaxMs      float64  `json:"max_ms"`
	Errors     uint64   `json:"errors"`
	Keys       uint64   `json:"keys"`
	Bytes      uint64   `json:"bytes"`
	// SlowestReplica is the replica whose calls stand out as slow (kvpb.StandsOut), "" when
	// none does.
	SlowestReplica string           `json:"slowest_replica"`
	ReplicaLatency []ReplicaLatency `json:"replica_latency"`

	token uint64
	p99   time.Duration // the worse of read and write p99; 0 when neither has enough samples
}

// Peer is what the coordinators saw of their calls to one node over all its vnodes, short
// window. Percentiles over fewer than kvpb.MinLatencySamples calls are null.
type Peer struct {
	Node         string   `json:"node"`
	Calls        uint64   `json:"calls"`
	P50Ms        *float64 `json:"p50_ms"`
	P99Ms        *float64 `json:"p99_ms"`
	Timeouts     uint64   `json:"timeouts"`
	Hedges       uint64   `json:"hedges"`
	BreakerTrips uint64   `json:"breaker_trips"`
}

// Vnodes is the merged answer (kvctl vnodes -o json).
type Vnodes struct {
	WindowSeconds int       `json:"window_seconds"`
	End           time.Time `json:"end"`
	Nodes         []string  `json:"nodes"`
	Vnodes        []Vnode   `json:"vnodes"`
	// Peers are the nodes called as replicas, by id.
	Peers []Peer `json:"peers"`

	p99 map[string]*kvpb.LatencyHistogram // calls per node over every vnode, for SlowestReplica
}

// VnodeCounts is the keys and bytes one node stores per vnode (NodeStats.vnodes).
type VnodeCounts = []*kvpb.VnodeStats

// MergeVnodes merges the nodes' coordinator views of every vnode of the ring rs over the short
// window: operations and errors are summed, histograms merged. Keys and bytes come from counts
// (each node's NodeStats per vnode, the largest count of the vnode's replicas). A vnode no
// coordinator saw an operation on is listed with zeros.
func MergeVnodes(reps []*kvpb.VnodesResponse, counts []VnodeCounts, rs *kvpb.RingState) *Vnodes {
	ring := NewRing(rs)
	res := &Vnodes{Vnodes: []Vnode{}, Peers: []Peer{}, p99: map[string]*kvpb.LatencyHistogram{}}
	peers := map[string]*Peer{}
	type acc struct {
		reads, writes *kvpb.LatencyHistogram
		replicas      map[string]*kvpb.LatencyHistogram
	}
	accs := map[uint64]*acc{}
	for _, r := range reps {
		res.Nodes = append(res.Nodes, r.GetNode())
		res.WindowSeconds = max(res.WindowSeconds, int(r.GetWindowSeconds()))
		if t := time.Unix(0, r.GetEndUnixNanos()).UTC(); t.After(res.End) {
			res.End = t
		}
		for _, v := range r.GetVnodes() {
			a := accs[v.GetToken()]
			if a == nil {
				a = &acc{reads: &kvpb.LatencyHistogram{}, writes: &kvpb.LatencyHistogram{}, replicas: map[string]*kvpb.LatencyHistogram{}}
				accs[v.GetToken()] = a
			}
			a.reads.Merge(v.GetReads_10S())
			a.writes.Merge(v.GetWrites_10S())
			for _, rl := range v.GetReplicas() {
				h := a.replicas[rl.GetNode()]
				if h == nil {
					h = &kvpb.LatencyHistogram{}
					a.replicas[rl.GetNode()] = h
				}
				h.Merge(rl.GetCalls_10S())
			}
		}
		for _, p := range r.GetPeers() {
			h := res.p99[p.GetNode()]
			if h == nil {
				h = &kvpb.LatencyHistogram{}
				res.p99[p.GetNode()] = h
			}
			h.Merge(p.GetCalls_10S())
			pr := peers[p.GetNode()]
			if pr == nil {
				pr = &Peer{Node: p.GetNode()}
				peers[p.GetNode()] = pr
			}
			pr.Timeouts += p.GetTimeouts_10S()
			pr.Hedges += p.GetHedges_10S()
			pr.BreakerTrips += p.GetBreakerTrips_10S()
		}
	}
	for _, id := range slices.Sorted(maps.Keys(peers)) {
		pr := peers[id]
		h := res.p99[id]
		pr.Calls = h.Count()
		pr.P50Ms, _ = quantileMs(h, 0.5)
		pr.P99Ms, _ = quantileMs(h, 0.99)
		res.Peers = append(res.Peers, *pr)
	}
	keys, bytes := map[uint64]uint64{}, map[uint64]uint64{}
	for _, vs := range counts {
		for _, v := range vs {
			keys[v.GetToken()] = max(keys[v.GetToken()], v.GetKeys())
			bytes[v.GetToken()] = max(bytes[v.GetToken()], v.GetBytes())
		}
	}
	secs := float64(max(res.WindowSeconds, 1))
	for _, tok := range ring.tokens {
		start, end := ring.Range(tok)
		v := Vnode{
			Vnode: strconv.FormatUint(tok, 10), Range: kvpb.FormatTokenRange(start, end), Owner: ring.Owner(tok),
			Replicas: ring.Replicas(tok), Keys: keys[tok], Bytes: bytes[tok], ReplicaLatency: []ReplicaLatency{}, token: tok,
		}
		if a := accs[tok]; a != nil {
			v.Reads, v.Writes = a.reads.Count(), a.writes.Count()
			v.OpsPerSec = float64(v.Reads+v.Writes) / secs
			v.Errors = a.reads.GetErrors() + a.writes.GetErrors()
			v.MaxMs = ms(max(a.reads.Max(), a.writes.Max()))
			var rp99, wp99 time.Duration
			v.ReadP50Ms, _ = quantileMs(a.reads, 0.5)
			v.ReadP99Ms, rp99 = quantileMs(a.reads, 0.99)
			v.WriteP50Ms, _ = quantileMs(a.writes, 0.5)
			v.WriteP99Ms, wp99 = quantileMs(a.writes, 0.99)
			v.p99 = max(rp99, wp99)
			v.SlowestReplica = res.slowest(a.replicas)
			ids := make([]string, 0, len(a.replicas))
			for id := range a.replicas {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				h := a.replicas[id]
				rl := ReplicaLatency{Node: id, Calls: h.Count()}
				rl.P50Ms, _ = quantileMs(h, 0.5)
				rl.P99Ms, _ = quantileMs(h, 0.99)
				v.ReplicaLatency = append(v.ReplicaLatency, rl)
			}
		}
		res.Vnodes = append(res.Vnodes, v)
	}
	return res
}

// slowest is the replica of a vnode whose calls stand out against the vnode's other
// replicas (kvpb.StandsOut); when no other replica of the vnode has enough calls to compare
// with, against the other nodes' calls over every vnode. The slowest of those that stand out.
func (res *Vnodes) slowest(replicas map[string]*kvpb.LatencyHistogram) string {
	best, bestQ := "", time.Duration(0)
	for id, h := range replicas {
		var others []*kvpb.LatencyHistogram
		enough := false
		for o, oh := range replicas {
			if o != id {
				others = append(others, oh)
				enough = enough || oh.Count() >= kvpb.MinLatencySamples
			}
		}
		if !enough {
			others = others[:0]
			for o, oh := range res.p99 {
				if o != id {
					others = append(others, oh)
				}
			}
		}
		q, _, ok := kvpb.StandsOut(h, others)
		if ok && (q > bestQ || q == bestQ && id < best) {
			best, bestQ = id, q
		}
	}
	return best
}

// VnodeSort is an order of kvctl vnodes: p99 (the worse of read and write, highest first), ops,
// errors or keys (most first); ties by token.
type VnodeSort string

// The orders.
const (
	SortP99    VnodeSort = "p99"
	SortOps    VnodeSort = "ops"
	SortErrors VnodeSort = "errors"
	SortKeys   VnodeSort = "keys"
)

// VnodeSorts are the orders, for flag help and completion.
var VnodeSorts = []string{string(SortP99), string(SortOps), string(SortErrors), string(SortKeys)}

// Sort orders vs by s.
func (s VnodeSort) Sort(vs []Vnode) {
	key := func(v Vnode) float64 {
		switch s {
		case SortOps:
			return v.OpsPerSec
		case SortErrors:
			return float64(v.Errors)
		case SortKeys:
			return float64(v.Keys)
		}
		return float64(v.p99)
	}
	slices.SortStableFunc(vs, func(a, b Vnode) int {
		if c := cmp.Compare(key(b), key(a)); c != 0 {
			return c
		}
		return cmp.Compare(a.token, b.token)
	})
}

func quantileMs(h *kvpb.LatencyHistogram, q float64) (*float64, time.Duration) {
	d, ok := h.Quantile(q)
	if !ok {
		return nil, 0
	}
	v := ms(d)
	return &v, d
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Token is the vnode's token: its range is (previous token, Token].
func (v Vnode) Token() uint64 { return v.token }
