package repair

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/follow"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// located is a session and where it lives: its coordinator's client and address.
type located struct {
	c    kvpb.AdminClient
	addr string
	p    *kvpb.RepairProgress
}

// locate finds the repair to show or abort: the session of the node at --addr when it is in
// flight (when that node reports it from the raft journal, the coordinator is asked for its
// live progress, and the journal's stands when it does not answer); else one in flight on
// another member (Status lists them), asked of its coordinator; else the --addr node's last
// session (or none).
func locate(ctx context.Context, d Deps) (located, error) {
	c, err := d.Admin("")
	if err != nil {
		return located{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	p, err := c.RepairStatus(cctx, &kvpb.RepairStatusRequest{})
	if err != nil {
		return located{}, rpcError(d.Addr(), err)
	}
	here := located{c: c, addr: d.Addr(), p: p}
	if present.RepairInFlight(p) && !p.GetJournaled() {
		return here, nil
	}
	st, err := c.Status(cctx, &kvpb.StatusRequest{})
	if err != nil {
		return here, nil
	}
	var flying []*kvpb.RepairProgress
	if present.RepairInFlight(p) {
		flying = append(flying, p)
	}
	flying = append(flying, st.GetRepairs()...)
	for _, r := range flying {
		if !present.RepairInFlight(r) {
			continue
		}
		for _, n := range st.GetNodes() {
			if n.GetId() != r.GetCoordinator() || n.GetGrpcAddr() == "" {
				continue
			}
			oc, err := d.Admin(n.GetGrpcAddr())
			if err != nil {
				continue
			}
			op, err := oc.RepairStatus(cctx, &kvpb.RepairStatusRequest{})
			if err == nil && present.RepairInFlight(op) && !op.GetJournaled() {
				return located{c: oc, addr: n.GetGrpcAddr(), p: op}, nil
			}
			if err == nil && op.GetId() == r.GetId() && !op.GetJournaled() {
				// Over on its coordinator: the journal asked lags behind it.
				return located{c: oc, addr: n.GetGrpcAddr(), p: op}, nil
			}
		}
	}
	return here, nil
}

// StatusOptions are `repair status`'s flags.
type StatusOptions struct {
	Deps
	// Watch follows a session in flight until it ends.
	Watch     bool
	Ranges    bool
	Interval  time.Duration
	Reconnect time.Duration
}

// NewCmdStatus returns `kvctl repair status`. runF replaces the run step in tests.
func NewCmdStatus(f *cli.Factory, runF func(*StatusOptions) error) *cobra.Command {
	o := &StatusOptions{Deps: f.AdminDeps()}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the repair in flight (or the last one): progress, per node and per replica pair",
		Long: `Show the repair session of the node at --addr: in flight, else its last one. When that node
runs none, a session in flight on another member is shown instead (asked of its coordinator).
--watch follows a session in flight until it ends, as kvctl repair does, then prints its
result; --ranges lists every range. -o json prints the RepairProgress message.`,
		Example: `  kvctl repair status
  kvctl repair status --watch
  kvctl repair status --ranges -o json | jq '.ranges[] | select(.error != "")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Interval <= 0 || o.Timeout <= 0 {
				return cli.UsageErrorf("--interval and --timeout must be positive")
			}
			if runF != nil {
				return runF(o)
			}
			return runStatus(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&o.Watch, "watch", "w", false, "follow the repair in flight until it ends")
	fl.BoolVar(&o.Ranges, "ranges", false, "list every range")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of each request")
	follow.AddFlags(cmd, &o.Interval, &o.Reconnect)
	return cmd
}

func runStatus(ctx context.Context, o *StatusOptions) error {
	l, err := locate(ctx, o.Deps)
	if err != nil {
		return err
	}
	if !o.Watch || !present.RepairInFlight(l.p) {
		if o.JSON() {
			return cli.PrintJSON(o.IO.Out, l.p)
		}
		if l.addr != o.Addr() {
			fmt.Fprintf(o.IO.Out, "coordinated by %s (%s)\n", l.p.GetCoordinator(), l.addr)
		}
		return PrintProgress(o.IO, l.p, o.Ranges)
	}
	d := o.Deps
	w := &watcher{Deps: d, Interval: o.Interval, Reconnect: o.Reconnect, Plan: l.p.GetPlan()}
	final, err := w.follow(ctx, l.c, l.addr, l.p.GetId())
	if err != nil {
		return err
	}
	return printOutcome(d, final, o.Ranges)
}

// AbortOptions are `repair abort`'s flags.
type AbortOptions struct {
	Deps
}

// NewCmdAbort returns `kvctl repair abort`. runF replaces the run step in tests.
func NewCmdAbort(f *cli.Factory, runF func(*AbortOptions) error) *cobra.Command {
	o := &AbortOptions{Deps: f.AdminDeps()}
	cmd := &cobra.Command{
		Use:   "abort",
		Short: "Stop the repair in flight; what it streamed stays",
		Long: `Stop the repair session in flight: that of the node at --addr, else one in flight on
another member. Ranges already repaired stay repaired (every record streamed was applied only
where it was newer); the rest are not compared. Run kvctl repair again to finish.`,
		Example: `  kvctl repair abort
  kvctl repair abort --addr 10.0.0.2:9090 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Timeout <= 0 {
				return cli.UsageErrorf("--timeout must be positive")
			}
			if runF != nil {
				return runF(o)
			}
			return runAbort(cmd.Context(), o)
		},
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 30*time.Second, "deadline of the abort")
	return cmd
}

func runAbort(ctx context.Context, o *AbortOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	l, err := locate(ctx, o.Deps)
	if err != nil {
		return err
	}
	if !present.RepairInFlight(l.p) {
		return errNoRepair
	}
	id := l.p.GetId()
	p, err := l.c.AbortRepair(ctx, &kvpb.AbortRepairRequest{})
	if err != nil {
		return rpcError(l.addr, err)
	}
	// The coordinator may answer before its workers have stopped: wait until it says so.
	for p.GetId() == id && p.GetState().InFlight() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("repair %d: abort asked, still %s on %s: %w", id, present.RepairState(p.GetState()), l.addr, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if p, err = l.c.RepairStatus(ctx, &kvpb.RepairStatusRequest{}); err != nil {
			return rpcError(l.addr, err)
		}
	}
	if p.GetPlan() == nil {
		p.Plan = l.p.GetPlan()
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, p)
	}
	done, total := present.RepairRanges(p)
	_, err = fmt.Fprintf(o.IO.Out, "repair %d (%s) %s after %d of %d ranges; what it streamed stays; run kvctl repair again to finish\n",
		id, present.Repair(p.GetPlan().GetRequest()), present.RepairState(p.GetState()), done, total)
	return err
}
