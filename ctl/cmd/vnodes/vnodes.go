// Package vnodes holds `kvctl vnodes`: every vnode with its range, owner, replicas, load,
// read and write latency, errors, keys, bytes and the replica that stands out as slow, merged
// from every node's coordinator view.
package vnodes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/oncall"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// Options are vnodes' flags.
type Options struct {
	IO      *cli.IOStreams
	Factory *cli.Factory
	NodeID  string
	Sort    string
	Timeout time.Duration
}

// NewCmdVnodes returns `kvctl vnodes`. runF replaces the run step in tests.
func NewCmdVnodes(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Factory: f, Sort: string(oncall.SortP99), Timeout: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "vnodes",
		Short: "Every vnode: range, owner, replicas, ops/s, read/write p50 and p99, errors, keys, bytes, slowest replica",
		Long: `List every vnode of the ring with the latency its clients saw over the last 10 s
(two complete 5 s slices), merged over every node's coordinator: ops/s, read and write p50 and
p99, the longest operation, errors, keys and bytes (the largest count of its replicas).

Each coordinator also times its calls to the vnode's replicas. SLOWEST names the replica
that stands out: its call p90 (from at least 50 calls) is above 10ms and above twice the
median p90 of the vnode's other replicas (or, when none of them has 50 calls, of the other
nodes over every vnode): a tenth of its calls slow, not a stall or two; "" when none does. A percentile over fewer than 50 samples shows "–"
(null in JSON).

--node lists only the vnodes that node replicates; --sort orders by p99 (the worse of read
and write), ops, errors or keys, highest first.`,
		Example: `  kvctl vnodes
  kvctl vnodes --node n2 --sort errors
  kvctl vnodes -o json | jq '.vnodes[] | select(.slowest_replica != "")'`,
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
	fl.StringVar(&o.NodeID, "node", "", "only the vnodes this node replicates")
	fl.StringVar(&o.Sort, "sort", o.Sort, "order: "+strings.Join(oncall.VnodeSorts, ", "))
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the calls to the nodes")
	_ = cmd.RegisterFlagCompletionFunc("node", f.CompleteNodeIDs)
	_ = cmd.RegisterFlagCompletionFunc("sort", cobra.FixedCompletions(oncall.VnodeSorts, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *Options) validate() error {
	switch {
	case !slices.Contains(oncall.VnodeSorts, o.Sort):
		return cli.UsageErrorf("--sort %q: want one of %s", o.Sort, strings.Join(oncall.VnodeSorts, ", "))
	case o.Timeout <= 0:
		return cli.UsageErrorf("--timeout must be positive")
	}
	return nil
}

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
	var ids []string
	for _, n := range st.GetNodes() {
		ids = append(ids, n.GetId())
	}
	if o.NodeID != "" && !slices.Contains(ids, o.NodeID) {
		return cli.UsageErrorf("--node %q: not in the ring (nodes: %s)", o.NodeID, strings.Join(ids, ", "))
	}
	var reps []*kvpb.VnodesResponse
	var counts []oncall.VnodeCounts
	for _, n := range st.GetNodes() {
		if n.GetError() != "" {
			fmt.Fprintf(o.IO.ErrOut, "skipping %s: %s\n", n.GetId(), n.GetError())
			continue
		}
		c, err := o.Factory.Admin(n.GetGrpcAddr())
		if err != nil {
			return err
		}
		r, err := c.Vnodes(ctx, &kvpb.VnodesRequest{})
		if err != nil {
			fmt.Fprintf(o.IO.ErrOut, "skipping %s: %s\n", n.GetId(), present.RPC(err))
			continue
		}
		reps = append(reps, r)
		if s, err := c.Stats(ctx, &kvpb.StatsRequest{Vnodes: true}); err == nil {
			counts = append(counts, s.GetVnodes())
		}
	}
	if len(reps) == 0 {
		return fmt.Errorf("no node of the ring answers")
	}
	res := oncall.MergeVnodes(reps, counts, rg.GetRing())
	if o.NodeID != "" {
		res.Vnodes = slices.DeleteFunc(res.Vnodes, func(v oncall.Vnode) bool { return !slices.Contains(v.Replicas, o.NodeID) })
	}
	oncall.VnodeSort(o.Sort).Sort(res.Vnodes)
	if o.Factory.JSON() {
		return cli.PrintJSON(o.IO.Out, res)
	}
	return table(o, res)
}

func table(o *Options, res *oncall.Vnodes) error {
	fmt.Fprintf(o.IO.ErrOut, "last %ds to %s, coordinators %s\n", res.WindowSeconds, res.End.Local().Format("15:04:05"), strings.Join(res.Nodes, ","))
	t := cli.NewTable(o.IO, "VNODE", "RANGE", "OWNER", "REPLICAS", "OPS/S", "READ-P50", "READ-P99", "WRITE-P50", "WRITE-P99", "ERRORS", "KEYS", "BYTES", "SLOWEST")
	for _, v := range res.Vnodes {
		slowest := v.SlowestReplica
		if slowest == "" {
			slowest = "-"
		}
		t.Row(v.Vnode, v.Range, v.Owner, strings.Join(v.Replicas, ","), fmt.Sprintf("%.1f", v.OpsPerSec),
			present.LatencyMs(v.ReadP50Ms), present.LatencyMs(v.ReadP99Ms), present.LatencyMs(v.WriteP50Ms), present.LatencyMs(v.WriteP99Ms),
			v.Errors, v.Keys, present.Bytes(v.Bytes), slowest)
	}
	return t.Render()
}
