// Package status holds `kvctl status`.
package status

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// Options are status's flags.
type Options struct {
	IO      *cli.IOStreams
	Admin   func() (kvpb.AdminClient, error)
	JSON    func() bool
	Addr    func() string
	Timeout time.Duration
}

// NewCmdStatus returns `kvctl status`. runF replaces the run step in tests.
func NewCmdStatus(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{
		IO:      f.IO,
		Admin:   func() (kvpb.AdminClient, error) { return f.Admin("") },
		JSON:    f.JSON,
		Addr:    func() string { return f.Addr },
		Timeout: 5 * time.Second,
	}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Every node as the contacted node sees it: state, ops/s, p99, keys, disk, breakers, ring epoch",
		Long: `status asks one node (--addr) for the cluster: the ring epoch, a ring change in flight,
and for every member its state, raft role, ops/s, p99 latency, keys, disk used and free, and
its circuit breakers towards the other nodes ("ok", or the peers whose breaker is open).
A "gray:" line names each node that answers but badly (lossy, slow links, cut one way, a
slow disk, flapping), as the answering nodes judge it from their calls and their peers'.
A "note:" line names a node that its peers saw go away and come back within the last
minute ("restarted" when its uptime is that short): one restart keeps it ready, but a node
that goes again within the minute is named flapping.
HINTS counts the durable hints each node holds for peers that missed writes (and those it
dropped as too old or over its bound; a repair covers their writes), LAST-REPAIRED how long
ago the node last completed a repair of the ranges it is the primary of ("never"), and a
line names each repair in flight. NOTE names a node that is slow for the others (its calls
stand out in most other nodes' views of their peers; JSON "slow"; kvctl vnodes has the
detail per vnode).
-o json prints the Admin Status response (StatusResponse in proto/kvpb/admin.proto) as a
stable schema: proto field names, every field present (an unset message is null), 64-bit
integers as JSON numbers, enums by name; fields are only ever added.`,
		Example: `  kvctl status
  kvctl status --addr 10.0.0.2:9090 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Timeout <= 0 {
				return cli.UsageErrorf("--timeout must be positive")
			}
			if runF != nil {
				return runF(o)
			}
			return run(cmd.Context(), o)
		},
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the request")
	return cmd
}

func run(ctx context.Context, o *Options) error {
	c, err := o.Admin()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resp, err := c.Status(ctx, &kvpb.StatusRequest{})
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, resp)
	}
	return Print(o.IO, resp)
}

// Print renders a StatusResponse as the status table at the present time (see PrintAt).
func Print(ios *cli.IOStreams, resp *kvpb.StatusResponse) error {
	return PrintAt(ios, resp, time.Now())
}

// PrintAt renders a StatusResponse as the status table: a summary line (ring epoch, replicas,
// nodes answering), the ring change and the repairs in flight if any, then one row per node;
// how long ago each node was last repaired is counted to now.
func PrintAt(ios *cli.IOStreams, resp *kvpb.StatusResponse, now time.Time) error {
	up := 0
	for _, n := range resp.GetNodes() {
		if n.GetError() == "" {
			up++
		}
	}
	fmt.Fprintf(ios.Out, "ring epoch %d, replicas %d, %d/%d nodes answering\n", resp.GetEpoch(), resp.GetReplicas(), up, len(resp.GetNodes()))
	if l := versionLine(resp.GetNodes()); l != "" {
		fmt.Fprintln(ios.Out, l)
	}
	if l := changeLine(resp.GetChange()); l != "" {
		fmt.Fprintln(ios.Out, l)
	}
	for _, r := range resp.GetRepairs() {
		if present.RepairInFlight(r) {
			fmt.Fprintln(ios.Out, present.RepairLine(r))
			if l := present.RepairPaused(r, now); l != "" {
				fmt.Fprintln(ios.Out, "  "+l)
			}
		}
	}
	gray := present.Gray(resp.GetNodes())
	for _, g := range gray {
		fmt.Fprintln(ios.Out, kvpb.GrayLine(g))
	}
	for _, r := range present.Restarts(resp.GetNodes(), gray) {
		fmt.Fprintln(ios.Out, r.Line())
	}
	t := cli.NewTable(ios, "NODE", "ADDR", "STATE", "ROLE", "EPOCH", "OPS/S", "P99", "KEYS", "DISK", "FREE", "HINTS", "LAST-REPAIRED", "BREAKERS", "NOTE")
	// The table lists the nodes as an operator counts them (n2 before n10); -o json keeps
	// the server's order.
	nodes := slices.Clone(resp.GetNodes())
	slices.SortStableFunc(nodes, func(a, b *kvpb.NodeStatus) int { return present.CompareIDs(a.GetId(), b.GetId()) })
	for _, n := range nodes {
		info := n.GetInfo()
		if info == nil {
			t.Row(n.GetId(), n.GetGrpcAddr(), present.NodeState(n.GetState()), "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", n.GetError())
			continue
		}
		note := n.GetError()
		if f := present.Faults(info); f != "" {
			note = f
		}
		if note == "" && n.GetSlow() != nil {
			note = present.Slow(n.GetSlow())
		}
		if note == "" && info.GetEpoch() != resp.GetEpoch() {
			note = fmt.Sprintf("epoch behind (%d)", info.GetEpoch())
		}
		if p := info.GetProblems(); note == "" && len(p) > 0 {
			note = strings.Join(p, "; ")
		}
		t.Row(n.GetId(), n.GetGrpcAddr(), present.NodeState(n.GetState()), present.RaftRole(info.GetRaftRole()), info.GetEpoch(),
			fmt.Sprintf("%.1f", info.GetOpsPerSec()), p99(info.GetP99Ms()), info.GetKeys(),
			present.Bytes(info.GetDiskBytes()), free(info.GetFreeDiskBytes()), hints(info), present.Age(info.GetLastRepairedUnix(), now),
			present.Breakers(info.GetBreakers()), note)
	}
	return t.Render()
}

// versionLine names the kvnode build the answering nodes run: "kvnode v1.2.3 on every
// node", or each node's when they differ (a rolling upgrade): "kvnode versions differ: n1
// v1.2.3, n2 v1.2.4". "" when no node reported one.
func versionLine(nodes []*kvpb.NodeStatus) string {
	var parts []string
	seen := map[string]bool{}
	for _, n := range nodes {
		if v := n.GetInfo().GetVersion(); v != "" {
			parts = append(parts, n.GetId()+" "+v)
			seen[v] = true
		}
	}
	switch len(seen) {
	case 0:
		return ""
	case 1:
		for v := range seen {
			return "kvnode " + v + " on every answering node"
		}
	}
	return "kvnode versions differ: " + strings.Join(parts, ", ")
}

// changeLine describes the ring change in flight: "change #3 in flight: rebalance, streaming,
// 44% (224.0 KiB of 512.0 KiB) at 50.0 KiB/s, ETA 6s"; a paused one ends with who paused it,
// when and why, and what it costs writes. "" when none is.
func changeLine(c *kvpb.ChangeProgress) string {
	if !present.InFlight(c) {
		return ""
	}
	paused := present.Paused(c, time.Now())
	l := fmt.Sprintf("change #%d in flight: %s", c.GetId(), present.Change(c.GetPlan().GetRequest()))
	if paused == "" {
		l += ", " + present.State(c.GetState())
	}
	if total := c.GetBytesTotal(); total > 0 {
		l += fmt.Sprintf(", %.0f%% (%s of %s)", min(100, 100*float64(c.GetBytesDone())/float64(total)),
			present.Bytes(c.GetBytesDone()), present.Bytes(total))
	}
	if r := c.GetRateBytesPerSec(); r > 0 {
		l += fmt.Sprintf(" at %s/s", present.Bytes(uint64(r)))
	}
	if e := c.GetEtaSeconds(); e > 0 {
		l += ", ETA " + present.ETA(e)
		if paused != "" {
			l += " once resumed"
		}
	}
	if msg := c.GetError(); msg != "" {
		l += " (" + msg + ")"
	}
	if paused != "" {
		l += "; " + paused
		if cost := present.PendingCost(c); cost != "" {
			l += "; " + cost
		}
	}
	return l
}

// hints is the durable hints a node holds for its peers, and how many it dropped:
// "120 (15.0 KiB)", "0, 3 dropped".
func hints(info *kvpb.NodeInfoResponse) string {
	s := present.Hints(info.GetHints())
	if d := info.GetHintsDropped(); d > 0 {
		s += fmt.Sprintf(", %d dropped", d)
	}
	return s
}

func p99(ms float64) string {
	if ms <= 0 {
		return present.NoSamples // fewer than kvpb.MinLatencySamples operations
	}
	return fmt.Sprintf("%.2fms", ms)
}

// free is the free disk of a node's data directory; "-" for in-memory nodes (0).
func free(n uint64) string {
	if n == 0 {
		return "-"
	}
	return present.Bytes(n)
}
