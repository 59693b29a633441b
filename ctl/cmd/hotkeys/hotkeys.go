// Package hotkeys holds `kvctl hotkeys`: the hottest keys of the cluster, merged from every
// node's hot keys summary (each node counts the keys it coordinated), with their share of
// their vnode and of the cluster and the error bound of each count. Values are never shown.
package hotkeys

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// Options are hotkeys' flags.
type Options struct {
	IO      *cli.IOStreams
	Factory *cli.Factory
	NodeID  string
	All     bool
	Vnode   string
	K       int
	Window  time.Duration
	Reveal  bool
	Timeout time.Duration
}

// NewCmdHotKeys returns `kvctl hotkeys`. runF replaces the run step in tests.
func NewCmdHotKeys(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Factory: f, K: 10, Window: 10 * time.Second, Timeout: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "hotkeys",
		Short: "The hottest keys, merged over nodes: reads/s, writes/s, share of vnode and cluster, error bound",
		Long: `List the hottest keys of the last window, hottest first. Every node keeps a bounded
summary (space-saving) of the keys it coordinated, per 10 s slice for a minute; kvctl merges
the nodes. A count is an upper bound: the true count is within "error" below it (for a key a
node did not list, the node's bound of unlisted keys is added to both). Reads, writes and
bytes per second are counted while a node watched the key (lower bounds).

share_of_vnode is the key's operations over its vnode's (every node counts the operations of
each vnode exactly); share_of_cluster over all the operations of the window.

Keys longer than 40 characters or not printable are cut and shown with ~ and a short hash;
--reveal prints them whole (nodes keep the first 128 bytes of a key). Values are never shown.
The window ends at the last complete 10 s slice.`,
		Example: `  kvctl hotkeys
  kvctl hotkeys --window 1m -k 20 -o json
  kvctl hotkeys --node n2 --vnode 9223372036854775807 --reveal`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.NodeID, "node", "", "only the keys this node coordinated")
	fl.BoolVar(&o.All, "all", false, "merge every answering node (the default)")
	fl.StringVar(&o.Vnode, "vnode", "", "only the keys of the vnode with this token (kvctl ring show lists them)")
	fl.IntVarP(&o.K, "top", "k", o.K, "how many keys")
	fl.DurationVar(&o.Window, "window", o.Window, "the window: 10s or 1m")
	fl.BoolVar(&o.Reveal, "reveal", false, "print long and binary keys whole (quoted when not printable)")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the calls to the nodes")
	cmd.MarkFlagsMutuallyExclusive("node", "all")
	_ = cmd.RegisterFlagCompletionFunc("node", f.CompleteNodeIDs)
	_ = cmd.RegisterFlagCompletionFunc("window", cobra.FixedCompletions([]string{"10s", "1m"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *Options) validate() error {
	switch {
	case o.K < 1:
		return cli.UsageErrorf("-k %d: want 1 or more", o.K)
	case o.Window != 10*time.Second && o.Window != time.Minute:
		return cli.UsageErrorf("--window %v: want 10s or 1m", o.Window)
	case o.Timeout <= 0:
		return cli.UsageErrorf("--timeout must be positive")
	}
	if o.Vnode != "" {
		if _, err := strconv.ParseUint(o.Vnode, 10, 64); err != nil {
			return cli.UsageErrorf("--vnode %q: want a vnode's token, a number (kvctl ring show lists them)", o.Vnode)
		}
	}
	return nil
}

// Key is one row of the answer (-o json: the objects of "keys").
type Key struct {
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
}

// Result is the answer of kvctl hotkeys -o json.
type Result struct {
	WindowSeconds int       `json:"window_seconds"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
	Nodes         []string  `json:"nodes"`
	OpsPerSec     float64   `json:"ops_per_sec"`
	Keys          []Key     `json:"keys"`
}

type member struct{ id, addr string }

func run(ctx context.Context, o *Options) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	ac, err := o.Factory.Admin("")
	if err != nil {
		return err
	}
	st, err := ac.Status(ctx, &kvpb.StatusRequest{})
	if err != nil {
		return cli.RPCError(o.Factory.Addr, err)
	}
	rg, err := ac.Ring(ctx, &kvpb.RingRequest{})
	if err != nil {
		return cli.RPCError(o.Factory.Addr, err)
	}
	ring := newRing(rg.GetRing())
	var vnode uint64
	if o.Vnode != "" {
		vnode, _ = strconv.ParseUint(o.Vnode, 10, 64)
		if !ring.isVnode(vnode) {
			return cli.UsageErrorf("--vnode %s: no vnode of the ring has this token (kvctl ring show lists them)", o.Vnode)
		}
	}
	var members []member
	var ids []string
	for _, n := range st.GetNodes() {
		ids = append(ids, n.GetId())
		switch {
		case o.NodeID != "" && n.GetId() != o.NodeID:
		case n.GetError() != "" && o.NodeID == "":
			fmt.Fprintf(o.IO.ErrOut, "skipping %s: %s\n", n.GetId(), n.GetError())
		default:
			members = append(members, member{n.GetId(), n.GetGrpcAddr()})
		}
	}
	if o.NodeID != "" && len(members) == 0 {
		return cli.UsageErrorf("--node %q: not in the ring (nodes: %s)", o.NodeID, strings.Join(ids, ", "))
	}
	if len(members) == 0 {
		return fmt.Errorf("no node of the ring answers")
	}
	var reps []*kvpb.HotKeysResponse
	for _, m := range members {
		c, err := o.Factory.Admin(m.addr)
		if err != nil {
			return err
		}
		r, err := c.HotKeys(ctx, &kvpb.HotKeysRequest{WindowSeconds: uint32(o.Window / time.Second)})
		if err != nil {
			if o.NodeID != "" {
				return cli.RPCError(m.addr, err)
			}
			fmt.Fprintf(o.IO.ErrOut, "skipping %s: %s\n", m.id, present.RPC(err))
			continue
		}
		reps = append(reps, r)
	}
	res, err := merge(reps, ring, o)
	if err != nil {
		return err
	}
	if o.Factory.JSON() {
		return cli.PrintJSON(o.IO.Out, res)
	}
	return table(o, res)
}

// merge adds the nodes' summaries: a key's counts are summed over the nodes that list it,
// and each node that does not list it adds its bound of unlisted keys to count and error.
func merge(reps []*kvpb.HotKeysResponse, ring *ringMap, o *Options) (*Result, error) {
	secs := o.Window.Seconds()
	res := &Result{WindowSeconds: int(secs), Keys: []Key{}}
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
		slicesSeen += int(r.GetSlices())
		if t := time.Unix(0, r.GetEndUnixNanos()).UTC(); t.After(res.End) {
			res.Start, res.End = time.Unix(0, r.GetStartUnixNanos()).UTC(), t
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
	if slicesSeen == 0 {
		return nil, fmt.Errorf("%w: no data for the last %v: no node coordinated an operation in it (nodes: %s)", cli.ErrNotFound, o.Window, strings.Join(res.Nodes, ", "))
	}
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
		v := ring.vnode(a.hk.GetToken())
		if o.Vnode != "" && strconv.FormatUint(v, 10) != o.Vnode {
			continue
		}
		k := Key{
			Key:          present.Key(a.hk.GetKey(), int(a.hk.GetKeyLen()), a.hk.GetToken(), o.Reveal),
			KeyLen:       int(a.hk.GetKeyLen()),
			ReadsPerSec:  float64(a.reads) / secs,
			WritesPerSec: float64(a.writes) / secs,
			BytesPerSec:  float64(a.by) / secs,
			Count:        count,
			Error:        errb,
			Vnode:        strconv.FormatUint(v, 10),
			Replicas:     ring.replicas(a.hk.GetToken()),
		}
		k.Truncated = !o.Reveal && k.Key != string(a.hk.GetKey()) || int(a.hk.GetKeyLen()) > len(a.hk.GetKey())
		if n := vnodeOps[v]; n > 0 {
			k.ShareOfVnode = min(1, float64(count)/float64(n))
		}
		if ops > 0 {
			k.ShareOfCluster = min(1, float64(count)/float64(ops))
		}
		res.Keys = append(res.Keys, k)
	}
	slices.SortFunc(res.Keys, func(a, b Key) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if len(res.Keys) > o.K {
		res.Keys = res.Keys[:o.K]
	}
	if len(res.Keys) == 0 && o.Vnode != "" {
		return nil, fmt.Errorf("%w: no key of vnode %s in the last %v", cli.ErrNotFound, o.Vnode, o.Window)
	}
	return res, nil
}

func table(o *Options, res *Result) error {
	fmt.Fprintf(o.IO.ErrOut, "window %s to %s (%v), %s, %.1f ops/s\n",
		res.Start.Local().Format("15:04:05"), res.End.Local().Format("15:04:05"), o.Window, strings.Join(res.Nodes, ","), res.OpsPerSec)
	t := cli.NewTable(o.IO, "KEY", "READS/S", "WRITES/S", "BYTES/S", "VNODE%", "CLUSTER%", "±OPS", "VNODE", "REPLICAS")
	for _, k := range res.Keys {
		t.Row(k.Key, fmt.Sprintf("%.1f", k.ReadsPerSec), fmt.Sprintf("%.1f", k.WritesPerSec), present.BytesShort(k.BytesPerSec)+"/s",
			fmt.Sprintf("%.1f", 100*k.ShareOfVnode), fmt.Sprintf("%.1f", 100*k.ShareOfCluster), k.Error, k.Vnode, strings.Join(k.Replicas, ","))
	}
	return t.Render()
}

// ringMap finds a token's vnode and replicas from the ring the node routes by.
type ringMap struct {
	tokens []uint64
	owners []string
	n      int // replication factor
}

func newRing(rs *kvpb.RingState) *ringMap {
	r := &ringMap{n: int(rs.GetReplicas())}
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

func (r *ringMap) index(t uint64) int {
	i, _ := slices.BinarySearch(r.tokens, t)
	if i == len(r.tokens) {
		return 0
	}
	return i
}

func (r *ringMap) isVnode(t uint64) bool {
	_, ok := slices.BinarySearch(r.tokens, t)
	return ok
}

func (r *ringMap) vnode(t uint64) uint64 {
	if len(r.tokens) == 0 {
		return 0
	}
	return r.tokens[r.index(t)]
}

// replicas are the first distinct owners clockwise from t.
func (r *ringMap) replicas(t uint64) []string {
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
