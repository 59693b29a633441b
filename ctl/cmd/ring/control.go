package ring

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/follow"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// StatusOptions are `ring status`'s flags.
type StatusOptions struct {
	Deps
	// Once prints one snapshot instead of following the change.
	Once bool
	// Ranges lists every range of the snapshot.
	Ranges    bool
	Interval  time.Duration
	Reconnect time.Duration
}

// NewCmdStatus returns `kvctl ring status`. runF replaces the run step in tests.
func NewCmdStatus(f *cli.Factory, runF func(*StatusOptions) error) *cobra.Command {
	o := &StatusOptions{Deps: f.AdminDeps()}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Follow the ring change in flight: bytes and keys done per node, rate, ETA",
		Long: `Show the ring change in flight and follow it until it is done: progress per receiving node
and in total (bytes and keys done of the estimate, rate, ETA), redrawn in place on a terminal,
one line per second when piped. Ctrl-C stops watching; the change goes on.

--once (or -o json) prints one snapshot instead; --ranges adds a line per token range.`,
		Example: `  kvctl ring status
  kvctl ring status --once --ranges
  kvctl ring status -o json | jq '{state, bytes_done, bytes_total}'`,
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
	fl.BoolVar(&o.Once, "once", false, "print one snapshot and exit")
	fl.BoolVar(&o.Ranges, "ranges", false, "with --once: list every range")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of each request")
	follow.AddFlags(cmd, &o.Interval, &o.Reconnect)
	return cmd
}

func runStatus(ctx context.Context, o *StatusOptions) error {
	c, err := o.Admin("")
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	p, err := c.ChangeStatus(cctx, &kvpb.ChangeStatusRequest{})
	cancel()
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, p)
	}
	if o.Once || !inFlight(p) {
		if err := PrintProgress(o.IO, p, o.Ranges); err != nil {
			return err
		}
		if inFlight(p) {
			return nil
		}
		return lastPrediction(ctx, o.Deps, c)
	}
	w := &watcher{Deps: o.Deps, Interval: o.Interval, Reconnect: o.Reconnect, Plan: p.GetPlan()}
	final, err := w.follow(ctx, p.GetId(), p.GetPlan().GetToEpoch())
	if err != nil {
		return err
	}
	if err := printOutcome(o.Deps, final); err != nil {
		return err
	}
	return lastPrediction(ctx, o.Deps, c)
}

// AbortOptions are `ring abort`'s flags.
type AbortOptions struct {
	Deps
}

// NewCmdAbort returns `kvctl ring abort`. runF replaces the run step in tests.
func NewCmdAbort(f *cli.Factory, runF func(*AbortOptions) error) *cobra.Command {
	o := &AbortOptions{Deps: f.AdminDeps()}
	cmd := &cobra.Command{
		Use:   "abort",
		Short: "Cancel the ring change in flight; the cluster stays on the old ring",
		Long: `Cancel the ring change in flight. The ring stays at its current epoch, writes stop going to
the pending owners, and the nodes that received ranges delete them. Abort is journaled in raft
like the change itself, so it holds across crashes.`,
		Example: `  kvctl ring abort
  kvctl ring abort -o json`,
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

var errNoChange = errors.New("no ring change in flight")

func runAbort(ctx context.Context, o *AbortOptions) error {
	c, err := o.Admin("")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cur, err := c.ChangeStatus(ctx, &kvpb.ChangeStatusRequest{})
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if !inFlight(cur) {
		return errNoChange
	}
	p, err := c.AbortChange(ctx, &kvpb.AbortChangeRequest{})
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	// The node may answer before it has applied the abort itself: wait until it has.
	for inFlight(p) && p.GetId() == cur.GetId() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("change %d: abort journaled, still %s on %s: %w", cur.GetId(), present.State(p.GetState()), o.Addr(), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if p, err = c.ChangeStatus(ctx, &kvpb.ChangeStatusRequest{}); err != nil {
			return cli.RPCError(o.Addr(), err)
		}
	}
	if p.GetId() == 0 {
		p.Id, p.Plan = cur.GetId(), cur.GetPlan()
	}
	if present.NoChange(p) {
		p.State = kvpb.ChangeState_CHANGE_STATE_ABORTED
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, p)
	}
	_, err = fmt.Fprintf(o.IO.Out, "change %d (%s) %s; the ring stays at epoch %d\n",
		p.GetId(), present.Change(p.GetPlan().GetRequest()), present.State(p.GetState()), p.GetPlan().GetFromEpoch())
	if r := p.GetPlan().GetRequest(); err == nil && r.GetKind() == kvpb.ChangeRequest_ADD {
		// The newcomer keeps the ring it joined with, so a plain add refuses it as not empty.
		_, err = fmt.Fprintf(o.IO.Out, "%[1]s keeps the ring of the aborted join; to add it again: kvctl ring add %[1]s=%[2]s --force\n",
			r.GetNodeId(), r.GetGrpcAddr())
	}
	return err
}
