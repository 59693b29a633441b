package ring

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/follow"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// ChangeOptions are the flags of `ring add` and `ring remove`.
type ChangeOptions struct {
	Deps
	Kind     kvpb.ChangeRequest_Kind
	NodeID   string
	NodeAddr string
	// RateBytes is the streaming throttle per receiver (--rate); 0 = the cluster's default.
	RateBytes uint64
	DryRun    bool
	Yes       bool
	Force     bool
	// NoWait returns once the change has started, without following it.
	NoWait bool
	// AllMoves lists every range move instead of a summary per source and target.
	AllMoves bool
	// Interval is how often progress is redrawn.
	Interval time.Duration
	// Reconnect bounds how long a lost watch is retried before giving up.
	Reconnect time.Duration
	// MaxMoves bounds the vnodes a rebalance moves (0: the cluster's default, 8).
	MaxMoves int

	rate string
}

// NewCmdAdd returns `kvctl ring add ID=ADDR`. runF replaces the run step in tests.
func NewCmdAdd(f *cli.Factory, runF func(*ChangeOptions) error) *cobra.Command {
	o := &ChangeOptions{Deps: f.AdminDeps(), Kind: kvpb.ChangeRequest_ADD}
	cmd := &cobra.Command{
		Use:   "add ID=ADDR",
		Short: "Admit a started, empty node: plan, confirm, stream its ranges in, show progress",
		Long: `Add a node to the ring. Start the node first without --peers (it waits, answering
"awaiting admission"), then add it with its id and gRPC address.

kvctl first prints the plan: which token ranges move from which node to which, the estimated
keys and bytes, every node's ownership before and after, and warnings. Then it asks for
confirmation (--yes skips the question; without a terminal, --yes is required), starts the
change and follows it: bytes and keys done per receiving node, rate and ETA, on stderr.
Ctrl-C stops watching; the change goes on (kvctl ring status / kvctl ring abort).

A plan the cluster refuses as unsafe (a change already in flight, a node that does not answer)
exits with code 3 unless --force.`,
		Example: `  # what would move, without changing anything
  kvctl ring add n4=10.0.0.4:9090 --dry-run

  # add it, streaming at most 50 MB/s into the new node, without a prompt
  kvctl ring add n4=10.0.0.4:9090 --rate 50 --yes

  # start it and return at once; follow later with "kvctl ring status"
  kvctl ring add n4=10.0.0.4:9090 --yes --no-wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, addr, ok := strings.Cut(args[0], "=")
			if !ok || id == "" || addr == "" || !strings.Contains(addr, ":") {
				return cli.UsageErrorf("%q: want ID=HOST:PORT, e.g. n4=10.0.0.4:9090", args[0])
			}
			o.NodeID, o.NodeAddr = id, addr
			return o.complete(cmd, runF)
		},
	}
	o.flags(cmd)
	return cmd
}

// NewCmdRebalance returns `kvctl ring rebalance`. runF replaces the run step in tests.
func NewCmdRebalance(f *cli.Factory, runF func(*ChangeOptions) error) *cobra.Command {
	o := &ChangeOptions{Deps: f.AdminDeps(), Kind: kvpb.ChangeRequest_REBALANCE}
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Move vnodes away from hot nodes by measured load: plan, confirm, stream, show progress",
		Long: `Hand vnodes (token ranges) from the most loaded nodes to less loaded ones.

Load is what each node measured over the last minute: replica reads and writes per second per
vnode. The node you ask collects it from every node, then, one vnode at a time, picks the move
(one of the hottest vnodes of the most loaded node, to another node) that lowers the highest
node load the most, predicting that what a replica served on a range moves to the node that
takes its place among the range's replicas. It stops once the most loaded node is within 10%
of the mean, when a move would gain less than 2%, or after --max-moves vnodes. The plan shows each vnode that moves with its load, the ranges
that stream, and every node's load before (measured) and after (predicted).

The vnodes chosen are part of the plan: what you confirm is what starts. A rebalance is a ring
change like add and remove: one at a time, streamed under traffic, abortable, resumable after
crashes. With nothing worth moving it says so and exits 0.`,
		Example: `  kvctl ring rebalance --dry-run            what would move, with load before and after
  kvctl ring rebalance --max-moves 4 --yes   move at most 4 vnodes, no prompt
  kvctl ring rebalance --rate 20 --yes       stream at most 20 MB/s into each receiver`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.MaxMoves < 0 || o.MaxMoves > 1024 {
				return cli.UsageErrorf("--max-moves %d: want 1..1024 (0: the default, 8)", o.MaxMoves)
			}
			return o.complete(cmd, runF)
		},
	}
	o.flags(cmd)
	cmd.Flags().IntVar(&o.MaxMoves, "max-moves", 0, "move at most this many vnodes (0: 8)")
	return cmd
}

// NewCmdRemove returns `kvctl ring remove ID` (alias drain). runF replaces the run step in tests.
func NewCmdRemove(f *cli.Factory, runF func(*ChangeOptions) error) *cobra.Command {
	o := &ChangeOptions{Deps: f.AdminDeps(), Kind: kvpb.ChangeRequest_REMOVE}
	cmd := &cobra.Command{
		Use:     "remove ID",
		Aliases: []string{"drain"},
		Short:   "Drain a node: stream its ranges to their new owners, then retire it",
		Long: `Remove a node from the ring. Its token ranges are streamed from a current replica to the
nodes that own them once it is gone; while that happens it is LEAVING and still serves. When
every range has arrived the ring flips to the next epoch and the node ends empty and out.

kvctl prints the plan first and asks for confirmation (--yes skips it; without a terminal,
--yes is required). The cluster refuses (exit 3) to remove a node when fewer than N nodes
would remain for N replicas, or while another change is in flight; --force overrides the
first, never the second.`,
		Example: `  kvctl ring drain n2 --dry-run
  kvctl ring remove n2 --rate 20 --yes
  kvctl ring remove n2 --yes -o json > change.json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.CompleteNodeArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" || strings.Contains(args[0], "=") {
				return cli.UsageErrorf("%q: want a node id, e.g. n2", args[0])
			}
			o.NodeID = args[0]
			return o.complete(cmd, runF)
		},
	}
	o.flags(cmd)
	return cmd
}

func (o *ChangeOptions) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&o.rate, "rate", "", "streaming throttle per receiving node in MB/s (unset or 0: the cluster's default, kvnode --change-rate; lift it later with kvctl ring rate --unlimited)")
	fl.BoolVar(&o.DryRun, "dry-run", false, "print the plan and exit")
	fl.BoolVarP(&o.Yes, "yes", "y", false, "do not ask for confirmation")
	fl.BoolVar(&o.Force, "force", false, "go ahead despite refusals that forcing can override")
	fl.BoolVar(&o.NoWait, "no-wait", false, "return once the change has started")
	fl.BoolVar(&o.AllMoves, "moves", false, "list every range move instead of a summary")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of each request")
	follow.AddFlags(cmd, &o.Interval, &o.Reconnect)
}

func (o *ChangeOptions) complete(cmd *cobra.Command, runF func(*ChangeOptions) error) error {
	if o.rate != "" {
		b, err := cli.ParseRate(o.rate)
		if err != nil {
			return cli.UsageErrorf("--rate: %s", err)
		}
		o.RateBytes = b
	}
	if o.Interval <= 0 || o.Timeout <= 0 {
		return cli.UsageErrorf("--interval and --timeout must be positive")
	}
	if !o.DryRun && !o.Yes && !o.IO.InTTY {
		return cli.UsageErrorf("stdin is not a terminal: pass --yes to %s without a prompt, or --dry-run to see the plan", present.Kind(o.Kind))
	}
	if runF != nil {
		return runF(o)
	}
	return runChange(cmd.Context(), o)
}

func (o *ChangeOptions) request() *kvpb.ChangeRequest {
	return &kvpb.ChangeRequest{Kind: o.Kind, NodeId: o.NodeID, GrpcAddr: o.NodeAddr, Force: o.Force, RateBytes: o.RateBytes, MaxMoves: uint32(o.MaxMoves)}
}

func runChange(ctx context.Context, o *ChangeOptions) error {
	c, err := o.Admin("")
	if err != nil {
		return err
	}
	req := o.request()
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	plan, err := c.PlanChange(cctx, req)
	cancel()
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	// The plan is the result of --dry-run; otherwise it goes to stderr under -o json, so
	// stdout holds the one JSON document of the outcome.
	planOut := o.IO
	if o.JSON() && !o.DryRun {
		planOut = &cli.IOStreams{Out: o.IO.ErrOut, OutTTY: o.IO.ErrTTY}
	}
	if o.JSON() && o.DryRun {
		if err := cli.PrintJSON(o.IO.Out, plan); err != nil {
			return err
		}
	} else if err := PrintPlan(planOut, plan, o.AllMoves); err != nil {
		return err
	}
	if req.GetKind() == kvpb.ChangeRequest_REBALANCE {
		if len(plan.GetRequest().GetTokenMoves()) == 0 {
			if !o.JSON() {
				fmt.Fprintln(o.IO.Out, "nothing to rebalance")
			}
			return nil
		}
		// Start exactly the vnode moves shown, not a fresh choice from newer load.
		req.TokenMoves = plan.GetRequest().GetTokenMoves()
	}
	if refusals := plan.GetRefusals(); len(refusals) > 0 && !o.Force {
		return cli.RefusedErrorf("%s (--force to override)", strings.Join(refusals, "; "))
	}
	if o.DryRun {
		// The dry run answers as the real run would: with --force, the change would start.
		if len(plan.GetRefusals()) > 0 && !o.JSON() {
			fmt.Fprintln(o.IO.Out, "--force overrides the refusals above: without --dry-run the change starts")
		}
		return nil
	}
	if !o.Yes {
		ok, err := o.confirm(fmt.Sprintf("%s: %d ranges, ~%s will move. Go ahead? [y/N] ",
			present.Change(req), len(plan.GetMoves()), present.Bytes(plan.GetEstBytes())))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: nothing changed", cli.ErrCancelled)
		}
	}
	if req.By == "" {
		req.By = cli.Caller() // kept in the change's history; a client certificate's CN wins
	}
	cctx, cancel = context.WithTimeout(ctx, o.Timeout)
	started, err := c.StartChange(cctx, req)
	cancel()
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	fmt.Fprintf(o.IO.ErrOut, "change %d started: %s, epoch %d -> %d, %d ranges to move\n",
		started.GetId(), present.Change(req), started.GetFromEpoch(), started.GetToEpoch(), len(started.GetMoves()))
	if o.NoWait {
		if o.JSON() {
			return cli.PrintJSON(o.IO.Out, started)
		}
		fmt.Fprintf(o.IO.Out, "change %d started: %s\nfollow it: kvctl ring status --addr %s\n", started.GetId(), present.Change(req), o.Addr())
		return nil
	}
	if started.Request == nil {
		started.Request = req
	}
	w := &watcher{Deps: o.Deps, Interval: o.Interval, Reconnect: o.Reconnect, Plan: started}
	final, err := w.follow(ctx, started.GetId(), started.GetToEpoch())
	if err != nil {
		return err
	}
	return printOutcome(o.Deps, final)
}

// confirm asks on stderr and reads one line from stdin.
func (o *ChangeOptions) confirm(prompt string) (bool, error) {
	fmt.Fprint(o.IO.ErrOut, prompt)
	line, err := bufio.NewReader(o.IO.In).ReadString('\n')
	if err != nil && line == "" {
		return false, fmt.Errorf("%w: no answer", cli.ErrCancelled)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// PrintPlan renders a plan: the moves (each, or summarised per source and target), each
// node's ownership before and after, warnings and refusals.
func PrintPlan(ios *cli.IOStreams, p *kvpb.ChangePlan, allMoves bool) error {
	w := ios.Out
	fmt.Fprintf(w, "plan: %s, ring epoch %d -> %d\n", present.Change(p.GetRequest()), p.GetFromEpoch(), p.GetToEpoch())
	var frac float64
	for _, m := range p.GetMoves() {
		frac += fraction(m.GetStart(), m.GetEnd())
	}
	if tms := p.GetRequest().GetTokenMoves(); len(tms) > 0 {
		fmt.Fprintf(w, "vnodes: %d change owner\n", len(tms))
		t := cli.NewTable(ios, "  VNODE", "FROM", "TO", "LOAD")
		for _, tm := range tms {
			t.Row(fmt.Sprintf("  %016x", tm.GetToken()), tm.GetFrom(), tm.GetTo(), opsRate(tm.GetLoad()))
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "moves: %d ranges (%s of the token space), est. %d keys, %s\n",
		len(p.GetMoves()), pct(frac), p.GetEstKeys(), present.Bytes(p.GetEstBytes()))
	if len(p.GetMoves()) > 0 {
		if allMoves || len(p.GetMoves()) <= 12 {
			t := cli.NewTable(ios, "  RANGE", "FROM", "TO", "SHARE", "EST-KEYS", "EST-BYTES")
			for _, m := range p.GetMoves() {
				t.Row("  "+tokenRange(m.GetStart(), m.GetEnd()), m.GetSource(), m.GetTarget(),
					pct(fraction(m.GetStart(), m.GetEnd())), m.GetEstKeys(), present.Bytes(m.GetEstBytes()))
			}
			if err := t.Render(); err != nil {
				return err
			}
		} else {
			type pair struct{ from, to string }
			type agg struct {
				n           int
				frac        float64
				keys, bytes uint64
			}
			by := map[pair]*agg{}
			var order []pair
			for _, m := range p.GetMoves() {
				k := pair{m.GetSource(), m.GetTarget()}
				a := by[k]
				if a == nil {
					a = &agg{}
					by[k] = a
					order = append(order, k)
				}
				a.n++
				a.frac += fraction(m.GetStart(), m.GetEnd())
				a.keys += m.GetEstKeys()
				a.bytes += m.GetEstBytes()
			}
			sort.Slice(order, func(i, j int) bool {
				if order[i].from != order[j].from {
					return order[i].from < order[j].from
				}
				return order[i].to < order[j].to
			})
			t := cli.NewTable(ios, "  FROM", "TO", "RANGES", "SHARE", "EST-KEYS", "EST-BYTES")
			for _, k := range order {
				a := by[k]
				t.Row("  "+k.from, k.to, a.n, pct(a.frac), a.keys, present.Bytes(a.bytes))
			}
			if err := t.Render(); err != nil {
				return err
			}
			fmt.Fprintln(w, "  (--moves lists every range)")
		}
	}
	fmt.Fprintln(w, "ownership (share of the token space as primary; as any replica):")
	before := map[string]*kvpb.NodeOwnership{}
	var ids []string
	for _, o := range p.GetBefore() {
		before[o.GetId()] = o
		ids = append(ids, o.GetId())
	}
	after := map[string]*kvpb.NodeOwnership{}
	for _, o := range p.GetAfter() {
		after[o.GetId()] = o
		if before[o.GetId()] == nil {
			ids = append(ids, o.GetId())
		}
	}
	sort.Strings(ids)
	rebalance := p.GetRequest().GetKind() == kvpb.ChangeRequest_REBALANCE
	cols := []string{"  NODE", "STATE", "VNODES", "SHARE", "REPLICA-SHARE", "KEYS"}
	if rebalance {
		cols = append(cols, "LOAD (measured -> predicted)")
	}
	t := cli.NewTable(ios, cols...)
	for _, id := range ids {
		b, a := before[id], after[id]
		row := []any{"  " + id, arrow(present.NodeState(b.GetState()), present.NodeState(a.GetState()), "-"), arrow(fmt.Sprint(b.GetVnodes()), fmt.Sprint(a.GetVnodes()), "0"),
			arrow(pctOf(b, false), pctOf(a, false), "-"), arrow(pctOf(b, true), pctOf(a, true), "-"),
			arrow(keysOf(b), keysOf(a), "-")}
		if rebalance {
			la := ""
			if a != nil {
				la = opsRate(a.GetLoad())
			}
			row = append(row, arrow(opsRate(b.GetLoad()), la, "-"))
		}
		t.Row(row...)
	}
	if err := t.Render(); err != nil {
		return err
	}
	for _, s := range p.GetWarnings() {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	for _, s := range p.GetRefusals() {
		fmt.Fprintf(w, "refused: %s\n", s)
	}
	return nil
}

// keysOf is a node's key count (measured before, estimated after); empty when the node is not
// there or did not answer.
func keysOf(o *kvpb.NodeOwnership) string {
	if o == nil || o.GetError() != "" || o.GetState() == kvpb.NodeState_NODE_STATE_REMOVED {
		return ""
	}
	return fmt.Sprint(o.GetKeys())
}

func pctOf(o *kvpb.NodeOwnership, replica bool) string {
	if o == nil {
		return ""
	}
	if replica {
		return pct(o.GetReplicaShare())
	}
	return pct(o.GetShare())
}

// arrow formats "before -> after", collapsing equal values; missing sides show as none.
func arrow(b, a, none string) string {
	if b == "" {
		b = none
	}
	if a == "" {
		a = none
	}
	if a == b {
		return a
	}
	return b + " -> " + a
}

// fraction is the share of the token space in (start, end]; start == end is the whole ring.
func fraction(start, end uint64) float64 {
	if start == end {
		return 1
	}
	return float64(end-start) / (1 << 64)
}

// printOutcome prints the final state of a change on stdout.
func printOutcome(d Deps, p *kvpb.ChangeProgress) error {
	if d.JSON() {
		if err := cli.PrintJSON(d.IO.Out, p); err != nil {
			return err
		}
	} else {
		kd, _, bd, _ := totals(p)
		took := ""
		if p.GetStartedUnix() > 0 && p.GetFinishedUnix() >= p.GetStartedUnix() {
			took = " in " + present.Took(p.GetStartedUnix(), p.GetFinishedUnix())
		}
		fmt.Fprintf(d.IO.Out, "change %d %s: %s; moved %s, %d keys%s; ring epoch %d\n",
			p.GetId(), present.State(p.GetState()), present.Change(p.GetPlan().GetRequest()), present.Bytes(bd), kd, took, epochAfter(p))
	}
	switch p.GetState() {
	case kvpb.ChangeState_CHANGE_STATE_DONE:
		return nil
	case kvpb.ChangeState_CHANGE_STATE_ABORTED:
		return fmt.Errorf("change %d was aborted; the ring stays at epoch %d", p.GetId(), p.GetPlan().GetFromEpoch())
	default:
		return fmt.Errorf("change %d %s: %s", p.GetId(), present.State(p.GetState()), p.GetError())
	}
}

func epochAfter(p *kvpb.ChangeProgress) uint64 {
	if p.GetState() == kvpb.ChangeState_CHANGE_STATE_DONE {
		return p.GetPlan().GetToEpoch()
	}
	return p.GetPlan().GetFromEpoch()
}

// opsRate formats a load in operations per second.
func opsRate(x float64) string { return fmt.Sprintf("%.0f op/s", x) }
