// Package oncall merges what every node keeps for the on-call view — its hot keys summary and
// its heat history — into the cluster's answer, and draws the heat table: the one merge that
// kvctl hotkeys, kvctl heat and the console share.
package oncall

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// ErrNoData marks a window no node has data for (kvctl exits 4, not found).
var ErrNoData = errors.New("no data")

// HotKey is one key of the merged answer (kvctl hotkeys -o json: the objects of "keys").
type HotKey struct {
	Key            string   `json:"key"`
	KeyLen         int      `json:"key_len"`
	Truncated      bool     `json:"truncated"`
	ReadsPerSec    float64  `json:"reads_per_sec"`
	WritesPerSec   float64  `json:"writes_per_sec"`
	BytesPerSec    float64  `json:"bytes_per_sec"`
	Count          uint64   `json:"count"`
	Error          uint64   `json:"error"`
	ShareOfVnode   float64  `json:"share_of_vnode"`
	ShareOfCluster float64  `json:"share_of_cluster"`
	Vnode          string   `json:"vnode"`
	Replicas       []string `json:"replicas"`
	// VnodeToken is Vnode as a number, VnodeOpsPerSec the vnode's operations per second.
	VnodeToken     uint64  `json:"-"`
	VnodeOpsPerSec float64 `json:"-"`
}

// HotKeys is the merged answer (kvctl hotkeys -o json).
type HotKeys struct {
	WindowSeconds int       `json:"window_seconds"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
	Nodes         []string  `json:"nodes"`
	OpsPerSec     float64   `json:"ops_per_sec"`
	Keys          []HotKey  `json:"keys"`
	// Coordinators is how many of the nodes coordinated an operation in the window: those
	// the clients send to (a node just added, or one no client knows, coordinates none).
	Coordinators int `json:"-"`
}

// HotKeysQuery is what to list.
type HotKeysQuery struct {
	// Window is the window asked for; 0 for a live one (its length is the nodes' answer's).
	Window time.Duration
	// Vnode, when HasVnode, lists only the keys of the vnode of that token.
	Vnode    uint64
	HasVnode bool
	// K is how many keys, hottest first (0: all).
	K int
	// Reveal prints long and binary keys whole.
	Reveal bool
}

// MergeHotKeys adds the nodes' summaries: a key's counts are summed over the nodes that list
// it, and each node that does not list it adds its bound of unlisted keys to count and error.
// Keys are placed on the ring rs (vnode, replicas). A window no node saw an operation in is
// ErrNoData.
func MergeHotKeys(reps []*kvpb.HotKeysResponse, rs *kvpb.RingState, q HotKeysQuery) (*HotKeys, error) {
	ring := NewRing(rs)
	secs := q.Window.Seconds()
	res := &HotKeys{WindowSeconds: int(secs), Keys: []HotKey{}}
	type acc struct {
		hk                            *kvpb.HotKey
		count, err, reads, writes, by uint64
		seen                          int
	}
	keys := map[string]*acc{}
	vnodeOps := map[uint64]uint64{}
	var ops uint64
	slicesSeen := 0
	for _, r := range reps {
		res.Nodes = append(res.Nodes, r.GetNode())
		ops += r.GetOps()
		if r.GetOps() > 0 {
			res.Coordinators++
		}
		slicesSeen += int(r.GetSlices())
		start, end := time.Unix(0, r.GetStartUnixNanos()).UTC(), time.Unix(0, r.GetEndUnixNanos()).UTC()
		if end.After(res.End) {
			res.Start, res.End = start, end
		}
		if q.Window == 0 {
			secs = max(secs, end.Sub(start).Seconds())
		}
		for _, v := range r.GetVnodes() {
			vnodeOps[v.GetToken()] += v.GetOps()
		}
		for _, k := range r.GetKeys() {
			id := strconv.FormatUint(k.GetToken(), 16) + string(k.GetKey())
			a := keys[id]
			if a == nil {
				a = &acc{hk: k}
				keys[id] = a
			}
			a.seen++
			a.count += k.GetCount()
			a.err += k.GetError()
			a.reads += k.GetReads()
			a.writes += k.GetWrites()
			a.by += k.GetBytes()
		}
	}
	what := "the last " + q.Window.String()
	if q.Window == 0 {
		what = "the live window"
	}
	if slicesSeen == 0 {
		return nil, fmt.Errorf("%w for %s: no node coordinated an operation in it (nodes: %s)", ErrNoData, what, strings.Join(res.Nodes, ", "))
	}
	secs = max(secs, 1e-3)
	res.WindowSeconds = int(secs)
	res.OpsPerSec = float64(ops) / secs
	for _, a := range keys {
		// A node that did not list the key may have counted up to its floor of it.
		var extra uint64
		if a.seen < len(reps) {
			for _, r := range reps {
				if !slices.ContainsFunc(r.GetKeys(), func(k *kvpb.HotKey) bool {
					return k.GetToken() == a.hk.GetToken() && bytes.Equal(k.GetKey(), a.hk.GetKey())
				}) {
					extra += r.GetFloor()
				}
			}
		}
		count, errb := a.count+extra, a.err+extra
		v := ring.Vnode(a.hk.GetToken())
		if q.HasVnode && v != q.Vnode {
			continue
		}
		k := HotKey{
			Key:            present.Key(a.hk.GetKey(), int(a.hk.GetKeyLen()), a.hk.GetToken(), q.Reveal),
			KeyLen:         int(a.hk.GetKeyLen()),
			ReadsPerSec:    float64(a.reads) / secs,
			WritesPerSec:   float64(a.writes) / secs,
			BytesPerSec:    float64(a.by) / secs,
			Count:          count,
			Error:          errb,
			Vnode:          strconv.FormatUint(v, 10),
			VnodeToken:     v,
			VnodeOpsPerSec: float64(vnodeOps[v]) / secs,
			Replicas:       ring.Replicas(a.hk.GetToken()),
		}
		k.Truncated = !q.Reveal && k.Key != string(a.hk.GetKey()) || int(a.hk.GetKeyLen()) > len(a.hk.GetKey())
		if n := vnodeOps[v]; n > 0 {
			k.ShareOfVnode = min(1, float64(count)/float64(n))
		}
		if ops > 0 {
			k.ShareOfCluster = min(1, float64(count)/float64(ops))
		}
		res.Keys = append(res.Keys, k)
	}
	slices.SortFunc(res.Keys, func(a, b HotKey) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if q.K > 0 && len(res.Keys) > q.K {
		res.Keys = res.Keys[:q.K]
	}
	if len(res.Keys) == 0 && q.HasVnode {
		return nil, fmt.Errorf("%w: no key of vnode %d in %s", ErrNoData, q.Vnode, what)
	}
	return res, nil
}

// Ring finds a token's vnode and replicas on a ring as the nodes route by it.
type Ring struct {
	tokens []uint64
	owners []string
	n      int // replication factor
}

// NewRing indexes rs.
func NewRing(rs *kvpb.RingState) *Ring {
	r := &Ring{n: int(rs.GetReplicas())}
	type tok struct {
		t  uint64
		id string
	}
	var ts []tok
	for _, m := range rs.GetMembers() {
		for _, t := range m.GetTokens() {
			ts = append(ts, tok{t, m.GetId()})
		}
	}
	slices.SortFunc(ts, func(a, b tok) int { return cmp.Compare(a.t, b.t) })
	for _, t := range ts {
		r.tokens = append(r.tokens, t.t)
		r.owners = append(r.owners, t.id)
	}
	return r
}

func (r *Ring) index(t uint64) int {
	i, _ := slices.BinarySearch(r.tokens, t)
	if i == len(r.tokens) {
		return 0
	}
	return i
}

// IsVnode tells whether t is the token of a vnode.
func (r *Ring) IsVnode(t uint64) bool {
	_, ok := slices.BinarySearch(r.tokens, t)
	return ok
}

// Vnode is the token of the vnode that holds token t.
func (r *Ring) Vnode(t uint64) uint64 {
	if len(r.tokens) == 0 {
		return 0
	}
	return r.tokens[r.index(t)]
}

// Owner is the node that owns the vnode holding token t.
func (r *Ring) Owner(t uint64) string {
	if len(r.tokens) == 0 {
		return ""
	}
	return r.owners[r.index(t)]
}

// Range is the token range (start, end] of the vnode holding token t.
func (r *Ring) Range(t uint64) (start, end uint64) {
	if len(r.tokens) == 0 {
		return 0, 0
	}
	i := r.index(t)
	return r.tokens[(i+len(r.tokens)-1)%len(r.tokens)], r.tokens[i]
}

// Replicas are the first distinct owners clockwise from t.
func (r *Ring) Replicas(t uint64) []string {
	var out []string
	if len(r.tokens) == 0 {
		return out
	}
	for i, j := r.index(t), 0; j < len(r.tokens) && len(out) < r.n; i, j = (i+1)%len(r.tokens), j+1 {
		if !slices.Contains(out, r.owners[i]) {
			out = append(out, r.owners[i])
		}
	}
	return out
}
