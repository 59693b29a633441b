// Package repair is `kvctl repair`: compare the replicas of token ranges by Merkle trees and
// stream only what differs, with a plan, progress and a result; follow or abort a session.
package repair

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/follow"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// Deps is what every repair command needs from the factory.
type Deps = cli.AdminDeps

// Options are the flags of `kvctl repair` and `kvctl repair plan`.
type Options struct {
	Deps
	NodeID string
	Vnodes []uint64
	// DryRun compares the trees and reports what differs, streaming nothing.
	DryRun bool
	// RateBytes is the streaming throttle per receiver (--rate); 0 = the nodes' default.
	RateBytes uint64
	// Detach returns once the session has started, without following it.
	Detach bool
	// PlanOnly prints the plan and starts nothing (kvctl repair plan).
	PlanOnly bool
	// Ranges lists every range of the plan (and of a dry run's differences).
	Ranges bool
	// Interval is how often progress is redrawn.
	Interval time.Duration
	// Reconnect bounds how long a lost watch is retried before giving up.
	Reconnect time.Duration

	rate   string
	vnodes []string
}

const longHelp = `Repair makes the replicas of token ranges agree without waiting for client reads.

For every range of the plan, the node you ask (--addr) coordinates: the range's replicas hash
it into Merkle trees (key, timestamp and tombstone flag per entry; values are hashed, not
sent), each pair of replicas compares its trees, descends only into the subtrees that differ,
and streams each other only the key ranges whose leaves differ. On apply the newer version
wins, as on every write, so a repair never undoes a newer write or a delete.

kvctl prints the plan first (the ranges, their replicas, the replica pairs compared, the
estimated keys and bytes, warnings), starts the session and follows it on stderr: ranges done
of all, keys and bytes streamed, rate and ETA, per node. Then it prints the result on stdout:
per replica pair, the tree leaves compared and mismatched and the keys repaired each way.

  --node ID       only the ranges ID holds a replica of (after a node was down, repair it)
  --vnode TOKEN   only the range that ends at this vnode's token (hex, as kvctl ring show
                  prints it); repeat or separate with commas
  --dry-run       compare and report what differs; stream nothing
  --rate MB/s     streaming throttle per receiving node (1 MB = 2^20 bytes; 0: the nodes'
                  default)
  --detach        start it and return; follow with kvctl repair status --watch

"kvctl repair plan" prints the plan alone and touches no data; a dry run reads every range
to hash it, so it costs disk reads like a repair.

One session per coordinating node; the cluster refuses a repair (exit 3) while a ring change
is in flight, while repair is paused, or when a replica of the plan does not answer: run it
once the ring is settled and every replica is up. A session and the ranges it has done are
journaled in raft: if its coordinator restarts it goes on from them, and if it stays down
(kvnode --repair-takeover-after) the raft leader takes the session over. Ctrl-C stops
watching; the repair goes on (kvctl repair status --watch, kvctl repair pause, resume,
abort).

Exit codes: 0 every range repaired (or compared, on a dry run); 1 the session failed or was
aborted (the result lists the ranges that failed), or a node could not be reached; 2 usage;
3 refused.`

const examples = `  # what would be compared, without touching data
  kvctl repair plan

  # after n3 was down: compare and repair every range n3 holds, at most 20 MB/s per receiver
  kvctl repair --node n3 --rate 20

  # which replicas differ, without streaming anything
  kvctl repair --dry-run

  # one range, by its vnode's token (kvctl ring show lists them)
  kvctl repair --vnode 1c71c71c71c71c71

  # start it and come back later
  kvctl repair --detach
  kvctl repair status --watch
  kvctl repair pause --reason "peak traffic"
  kvctl repair resume
  kvctl repair abort

  # the result as JSON (the plan goes to stderr)
  kvctl repair -o json | jq '.pairs[] | {a, b, leaves_mismatched}'`

// NewCmdRepair returns `kvctl repair` with its subcommands. runF replaces the run step in tests.
func NewCmdRepair(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{Deps: f.AdminDeps()}
	cmd := &cobra.Command{
		Use:     "repair",
		Short:   "Make replicas agree: compare Merkle trees per token range, stream only what differs",
		Long:    longHelp,
		Example: examples,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.complete(cmd, runF)
		},
	}
	o.flags(cmd, f, true)
	cmd.AddCommand(
		NewCmdPlan(f, runF),
		NewCmdStatus(f, nil),
		NewCmdAbort(f, nil),
		NewCmdPause(f, nil),
		NewCmdResume(f, nil),
	)
	return cmd
}

// NewCmdPlan returns `kvctl repair plan`. runF replaces the run step in tests.
func NewCmdPlan(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{Deps: f.AdminDeps(), PlanOnly: true}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Print a repair's plan (ranges, replica pairs, estimates) and start nothing",
		Long: `Print what "kvctl repair" with the same flags would compare: the token ranges, the replicas of
each, the replica pairs, the estimated keys and bytes (each range's primary replica counts
them), warnings and refusals. Nothing is read beyond those counts and nothing starts. A plan
the cluster would refuse exits with code 3.`,
		Example: `  kvctl repair plan
  kvctl repair plan --node n3 --ranges
  kvctl repair plan -o json | jq '.ranges | length'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.complete(cmd, runF)
		},
	}
	o.flags(cmd, f, false)
	return cmd
}

func (o *Options) flags(cmd *cobra.Command, f *cli.Factory, run bool) {
	fl := cmd.Flags()
	fl.StringVar(&o.NodeID, "node", "", "only the ranges this node holds a replica of")
	_ = cmd.RegisterFlagCompletionFunc("node", f.CompleteNodeIDs)
	fl.StringSliceVar(&o.vnodes, "vnode", nil, "only the range ending at this vnode token, in hex (repeatable, or comma-separated)")
	_ = cmd.RegisterFlagCompletionFunc("vnode", completeVnodes(f))
	fl.BoolVar(&o.Ranges, "ranges", false, "list every range: of the plan instead of a summary, and of the result's differences")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of each request")
	if !run {
		return
	}
	fl.BoolVar(&o.DryRun, "dry-run", false, "compare the replicas and report what differs; stream nothing")
	fl.StringVar(&o.rate, "rate", "", "streaming throttle per receiving node in MB/s (unset or 0: the nodes' default)")
	fl.BoolVar(&o.Detach, "detach", false, "return once the repair has started; follow it with kvctl repair status --watch")
	follow.AddFlags(cmd, &o.Interval, &o.Reconnect)
}

// ParseToken parses a vnode token as kvctl prints it: 16 hex digits, "0x" allowed.
func ParseToken(s string) (uint64, error) {
	t := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "0x")
	v, err := strconv.ParseUint(t, 16, 64)
	if err != nil || t == "" {
		return 0, fmt.Errorf("vnode %q: want a token in hex, as kvctl ring show prints it (e.g. 1c71c71c71c71c71)", s)
	}
	return v, nil
}

func (o *Options) complete(cmd *cobra.Command, runF func(*Options) error) error {
	if o.rate != "" {
		b, err := cli.ParseRate(o.rate)
		if err != nil {
			return cli.UsageErrorf("--rate: %s", err)
		}
		o.RateBytes = b
	}
	o.Vnodes = nil
	seen := map[uint64]bool{}
	for _, s := range o.vnodes {
		v, err := ParseToken(s)
		if err != nil {
			return cli.UsageErrorf("--vnode: %s", err)
		}
		if !seen[v] {
			o.Vnodes = append(o.Vnodes, v)
			seen[v] = true
		}
	}
	if o.NodeID != "" && strings.ContainsAny(o.NodeID, "=,: ") {
		return cli.UsageErrorf("--node %q: want a node id, e.g. n2", o.NodeID)
	}
	if o.Timeout <= 0 || (!o.PlanOnly && (o.Interval <= 0 || o.Reconnect < 0)) {
		return cli.UsageErrorf("--interval and --timeout must be positive")
	}
	if runF != nil {
		return runF(o)
	}
	return runRepair(cmd.Context(), o)
}

func (o *Options) request() *kvpb.RepairRequest {
	return &kvpb.RepairRequest{NodeId: o.NodeID, Vnodes: o.Vnodes, DryRun: o.DryRun, RateBytes: o.RateBytes}
}

func runRepair(ctx context.Context, o *Options) error {
	c, err := o.Admin("")
	if err != nil {
		return err
	}
	req := o.request()
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	plan, err := c.PlanRepair(cctx, req)
	cancel()
	if err != nil {
		return rpcError(o.Addr(), err)
	}
	if plan.GetRequest() == nil {
		plan.Request = req
	}
	// The plan is the result of kvctl repair plan; otherwise it goes to stderr under -o json,
	// so stdout holds the one JSON document of the outcome.
	planOut := o.IO
	if o.JSON() && !o.PlanOnly {
		planOut = &cli.IOStreams{Out: o.IO.ErrOut, OutTTY: o.IO.ErrTTY}
	}
	if o.JSON() && o.PlanOnly {
		if err := cli.PrintJSON(o.IO.Out, plan); err != nil {
			return err
		}
	} else if err := PrintPlan(planOut, plan, o.Ranges); err != nil {
		return err
	}
	if refusals := plan.GetRefusals(); len(refusals) > 0 {
		return cli.RefusedErrorf("%s", strings.Join(refusals, "; "))
	}
	if o.PlanOnly {
		return nil
	}
	if len(plan.GetRanges()) == 0 {
		if !o.JSON() {
			fmt.Fprintln(o.IO.Out, "nothing to repair: the plan has no range")
		}
		return nil
	}
	cctx, cancel = context.WithTimeout(ctx, o.Timeout)
	started, err := c.StartRepair(cctx, req)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			// Ctrl-C while the start was on the wire: the session may have begun anyway.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Timeout)
			p, serr := c.RepairStatus(sctx, &kvpb.RepairStatusRequest{})
			cancel()
			if serr == nil && p.GetState().InFlight() {
				return (&watcher{Deps: o.Deps}).interrupted(o.Addr(), p.GetId())
			}
		}
		return rpcError(o.Addr(), err)
	}
	if refusals := started.GetRefusals(); len(refusals) > 0 {
		// The cluster changed between the plan and the start (a ring change began).
		return cli.RefusedErrorf("%s", strings.Join(refusals, "; "))
	}
	if started.GetRequest() == nil {
		started.Request = req
	}
	fmt.Fprintf(o.IO.ErrOut, "repair %d started on %s: %s, %d ranges, %d replica pairs\n",
		started.GetId(), o.Addr(), present.Repair(started.GetRequest()), len(started.GetRanges()), len(started.GetPairs()))
	if o.Detach {
		if o.JSON() {
			return cli.PrintJSON(o.IO.Out, started)
		}
		fmt.Fprintf(o.IO.Out, "repair %d started: %s\nfollow it: kvctl repair status --watch --addr %s\nabort it:  kvctl repair abort --addr %s\n",
			started.GetId(), present.Repair(started.GetRequest()), o.Addr(), o.Addr())
		return nil
	}
	w := &watcher{Deps: o.Deps, Interval: o.Interval, Reconnect: o.Reconnect, Plan: started}
	final, err := w.follow(ctx, c, o.Addr(), started.GetId())
	if err != nil {
		return err
	}
	return printOutcome(o.Deps, final, o.Ranges)
}

// completeVnodes completes --vnode with the ring's tokens, described by their owner.
func completeVnodes(f *cli.Factory) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := f.Admin("")
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := c.Ring(ctx, &kvpb.RingRequest{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, m := range resp.GetRing().GetMembers() {
			for _, t := range m.GetTokens() {
				if s := fmt.Sprintf("%016x", t); strings.HasPrefix(s, strings.ToLower(toComplete)) {
					out = append(out, cobra.CompletionWithDesc(s, "vnode of "+m.GetId()))
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
