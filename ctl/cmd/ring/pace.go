package ring

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// RateOptions are `ring rate`'s arguments.
type RateOptions struct {
	Deps
	RateBytes uint64
	// Unlimited lifts the throttle (--unlimited); RateBytes is 0 then.
	Unlimited bool
	// NodeID sets one receiver's throttle (--node) instead of the change's.
	NodeID string
}

// NewCmdRate returns `kvctl ring rate MB/s`. runF replaces the run step in tests.
func NewCmdRate(f *cli.Factory, runF func(*RateOptions) error) *cobra.Command {
	o := &RateOptions{Deps: f.AdminDeps()}
	cmd := &cobra.Command{
		Use:   "rate (MB/s | --unlimited) [--node ID]",
		Short: "Change the streaming throttle of the ring change in flight",
		Long: `Change how fast the change in flight streams, per receiving node, in MB/s (1 MB = 2^20
bytes). --unlimited lifts the throttle. 0 is refused: to stop streaming, pause the change
(kvctl ring pause). --node ID sets that receiving node's own throttle, which then overrides
the change's for it. Journaled in raft; receivers take a new rate within a second, in the
middle of a range. It applies to this change only: the next change starts at its own --rate
(or kvnode --change-rate), and --node rates end with this change.`,
		Example: `  kvctl ring rate 100              faster: the cluster has headroom
  kvctl ring rate 5                slower: clients' p99 suffers
  kvctl ring rate 2 --node n4      only n4 pulls slower (a small disk, a busy rack)
  kvctl ring rate --unlimited      no throttle at all
  kvctl ring pause                 stop streaming instead`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.Unlimited && len(args) > 0:
				return cli.UsageErrorf("a rate and --unlimited together: give one")
			case !o.Unlimited && len(args) != 1:
				return cli.UsageErrorf("give a rate in MB/s, or --unlimited")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				b, err := cli.ParseRate(args[0])
				if err != nil {
					return cli.UsageErrorf("%s", err)
				}
				if b == 0 {
					return cli.UsageErrorf("rate 0 would stream nothing: to stop the change use kvctl ring pause; to lift the throttle, --unlimited")
				}
				o.RateBytes = b
			}
			if runF != nil {
				return runF(o)
			}
			return runRate(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&o.Unlimited, "unlimited", false, "lift the throttle")
	fl.StringVar(&o.NodeID, "node", "", "set only this receiving node's throttle")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the request")
	return cmd
}

func runRate(ctx context.Context, o *RateOptions) error {
	c, err := o.Admin("")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	p, err := c.SetChangeRate(ctx, &kvpb.SetChangeRateRequest{RateBytes: o.RateBytes, NodeId: o.NodeID, Unlimited: o.Unlimited})
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, p)
	}
	who := "per receiving node"
	if o.NodeID != "" {
		who = "for " + o.NodeID
	}
	_, err = fmt.Fprintf(o.IO.Out, "change %d: streaming throttle now %s %s, for this change only (the next starts at its --rate)\n",
		p.GetId(), present.Limit(o.RateBytes), who)
	return err
}

// ParallelOptions are `ring parallel`'s arguments.
type ParallelOptions struct {
	Deps
	Parallel int
}

// NewCmdParallel returns `kvctl ring parallel N`. runF replaces the run step in tests.
func NewCmdParallel(f *cli.Factory, runF func(*ParallelOptions) error) *cobra.Command {
	o := &ParallelOptions{Deps: f.AdminDeps()}
	cmd := &cobra.Command{
		Use:   "parallel N",
		Short: "Set how many ranges each receiving node of the change in flight pulls at once",
		Long: `Set how many ranges each receiving node pulls at once for the change in flight (the nodes'
default is 4). Fewer pulls at once spread a receiver's load over more time; more overlap the
start of one range with the transfer of others. Journaled in raft; within a second a
receiver stops the pulls beyond a lower number (they go on later from where they stopped)
or starts more. It applies to this change only: the next change starts at the nodes'
default.`,
		Example: `  kvctl ring parallel 1
  kvctl ring parallel 8`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 || n > 1024 {
				return cli.UsageErrorf("parallel %q: want a whole number of pulls per receiving node, 1 to 1024", args[0])
			}
			o.Parallel = n
			if runF != nil {
				return runF(o)
			}
			return runParallel(cmd.Context(), o)
		},
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the request")
	return cmd
}

func runParallel(ctx context.Context, o *ParallelOptions) error {
	c, err := o.Admin("")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	p, err := c.SetChangeParallel(ctx, &kvpb.SetChangeParallelRequest{Parallel: uint32(o.Parallel)})
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, p)
	}
	_, err = fmt.Fprintf(o.IO.Out, "change %d: %d pulls at once per receiving node, for this change only (the next starts at the nodes' default)\n",
		p.GetId(), o.Parallel)
	return err
}

// PauseOptions are `ring pause`'s and `ring resume`'s flags.
type PauseOptions struct {
	Deps
	Reason string
	// By names the caller when its connection has no client certificate: "kvctl@host".
	By string
	// Resume resumes instead of pausing.
	Resume bool
}

// NewCmdPause returns `kvctl ring pause`. runF replaces the run step in tests.
func NewCmdPause(f *cli.Factory, runF func(*PauseOptions) error) *cobra.Command {
	o := &PauseOptions{Deps: f.AdminDeps(), By: cli.Caller()}
	cmd := &cobra.Command{
		Use:   "pause [--reason TEXT]",
		Short: "Stop the ring change in flight from streaming, until kvctl ring resume",
		Long: `Pause the ring change in flight: every receiving node stops pulling within a second (the
chunk being applied completes) and nothing streams until "kvctl ring resume". The pause is
journaled in raft with who paused (the client certificate's name, else user@host), when and
--reason, so it holds across restarts and raft leader changes; ring status, kvctl status and
the console show it. What was streamed stays: resume goes on from where each range stopped.

While paused the change is still in flight: writes still go to the pending replicas as well
(each write waits for its ack plus the pending replicas, as ring status says), and abort
still works. A change whose ranges have all arrived cannot be paused: it is handing over.
Exit 3 when there is nothing to pause or the change is paused already.`,
		Example: `  kvctl ring pause --reason "p99 over SLO during the sale"
  kvctl ring status --once
  kvctl ring resume`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(o.Reason) > maxReason {
				return cli.UsageErrorf("--reason of %d bytes: at most %d", len(o.Reason), maxReason)
			}
			if runF != nil {
				return runF(o)
			}
			return runPause(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Reason, "reason", "", "why, journaled with the pause and shown with it")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the request")
	return cmd
}

// maxReason is the node's bound on a pause's reason (change.MaxPauseReason).
const maxReason = 256

// NewCmdResume returns `kvctl ring resume`. runF replaces the run step in tests.
func NewCmdResume(f *cli.Factory, runF func(*PauseOptions) error) *cobra.Command {
	o := &PauseOptions{Deps: f.AdminDeps(), By: cli.Caller(), Resume: true}
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Let the paused ring change stream again",
		Long: `Resume the paused ring change: every receiving node goes on pulling from where each range
stopped, at the change's rate. Journaled in raft with who resumed. Exit 3 when no change is
paused.`,
		Example: `  kvctl ring resume`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(o)
			}
			return runPause(cmd.Context(), o)
		},
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the request")
	return cmd
}

func runPause(ctx context.Context, o *PauseOptions) error {
	c, err := o.Admin("")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var p *kvpb.ChangeProgress
	if o.Resume {
		p, err = c.ResumeChange(ctx, &kvpb.ResumeChangeRequest{By: o.By})
	} else {
		p, err = c.PauseChange(ctx, &kvpb.PauseChangeRequest{Reason: o.Reason, By: o.By})
	}
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, p)
	}
	if o.Resume {
		_, err = fmt.Fprintf(o.IO.Out, "change %d (%s) resumed: %s\n", p.GetId(), present.Change(p.GetPlan().GetRequest()), summary(p))
		return err
	}
	line := present.Paused(p, time.Now())
	if line == "" { // answered before this node applied it; the pause is journaled
		line = "PAUSED"
	}
	_, err = fmt.Fprintf(o.IO.Out, "change %d (%s) %s\n", p.GetId(), present.Change(p.GetPlan().GetRequest()), line)
	if cost := present.PendingCost(p); err == nil && cost != "" {
		_, err = fmt.Fprintf(o.IO.Out, "while paused, %s; kvctl ring resume goes on, kvctl ring abort gives up\n", cost)
	}
	return err
}
