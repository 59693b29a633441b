// Package hotkeys holds `kvctl hotkeys`: the hottest keys of the cluster, merged from every
// node's hot keys summary (each node counts the keys it coordinated), with their share of
// their vnode and of the cluster and the error bound of each count. Values are never shown.
package hotkeys

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/oncall"
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
	ring := oncall.NewRing(rg.GetRing())
	q := oncall.HotKeysQuery{Window: o.Window, K: o.K, Reveal: o.Reveal}
	if o.Vnode != "" {
		q.Vnode, _ = strconv.ParseUint(o.Vnode, 10, 64)
		q.HasVnode = true
		if !ring.IsVnode(q.Vnode) {
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
	res, err := oncall.MergeHotKeys(reps, rg.GetRing(), q)
	if errors.Is(err, oncall.ErrNoData) {
		return fmt.Errorf("%w: %w", cli.ErrNotFound, err)
	}
	if err != nil {
		return err
	}
	if o.Factory.JSON() {
		return cli.PrintJSON(o.IO.Out, res)
	}
	return table(o, res)
}

func table(o *Options, res *oncall.HotKeys) error {
	fmt.Fprintf(o.IO.ErrOut, "window %s to %s (%v), %s, %.1f ops/s\n",
		res.Start.Local().Format("15:04:05"), res.End.Local().Format("15:04:05"), o.Window, strings.Join(res.Nodes, ","), res.OpsPerSec)
	t := cli.NewTable(o.IO, "KEY", "READS/S", "WRITES/S", "BYTES/S", "VNODE%", "CLUSTER%", "±OPS", "VNODE", "REPLICAS")
	for _, k := range res.Keys {
		t.Row(k.Key, fmt.Sprintf("%.1f", k.ReadsPerSec), fmt.Sprintf("%.1f", k.WritesPerSec), present.BytesShort(k.BytesPerSec)+"/s",
			fmt.Sprintf("%.1f", 100*k.ShareOfVnode), fmt.Sprintf("%.1f", 100*k.ShareOfCluster), k.Error, k.Vnode, strings.Join(k.Replicas, ","))
	}
	return t.Render()
}
