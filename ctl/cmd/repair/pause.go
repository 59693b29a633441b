package repair

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// PauseOptions are `repair pause`'s and `repair resume`'s flags.
type PauseOptions struct {
	Deps
	Reason string
	// By names who asks (user@host).
	By string
}

// NewCmdPause returns `kvctl repair pause`. runF replaces the run step in tests.
func NewCmdPause(f *cli.Factory, runF func(*PauseOptions) error) *cobra.Command {
	o := &PauseOptions{Deps: f.AdminDeps()}
	cmd := &cobra.Command{
		Use:   "pause",
		Short: "Pause repair cluster-wide (journaled in raft: who, when, why); resume goes on",
		Long: `Pause repair on every node: the sessions in flight stop their tree walks and pulls within a
second (the chunk in flight completes) and wait; background rounds and new sessions wait too.
The pause is journaled in raft with who asked, when and why, so it outlives restarts of any
node; kvctl repair status and the console show it. Ranges already repaired stay repaired;
kvctl repair resume goes on from them (a range cut off by the pause is compared again).
Abort still works while paused. Asked when no repair is in flight, or when repair is paused
already, it exits with code 3.`,
		Example: `  kvctl repair pause --reason "backup window"
  kvctl repair status
  kvctl repair resume`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Timeout <= 0 {
				return cli.UsageErrorf("--timeout must be positive")
			}
			if o.By == "" {
				o.By = cli.Caller()
			}
			if runF != nil {
				return runF(o)
			}
			return runPause(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Reason, "reason", "", "why, shown beside the pause")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 30*time.Second, "deadline of the request")
	return cmd
}

// NewCmdResume returns `kvctl repair resume`. runF replaces the run step in tests.
func NewCmdResume(f *cli.Factory, runF func(*PauseOptions) error) *cobra.Command {
	o := &PauseOptions{Deps: f.AdminDeps()}
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Resume paused repair: sessions go on from the ranges done",
		Long: `Lift the pause of kvctl repair pause: the sessions in flight go on from the ranges they had
done, background rounds run again. Asked when repair is not paused, it exits with code 3.`,
		Example: `  kvctl repair resume
  kvctl repair status --watch`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Timeout <= 0 {
				return cli.UsageErrorf("--timeout must be positive")
			}
			if o.By == "" {
				o.By = cli.Caller()
			}
			if runF != nil {
				return runF(o)
			}
			return runResume(cmd.Context(), o)
		},
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 30*time.Second, "deadline of the request")
	return cmd
}

func runPause(ctx context.Context, o *PauseOptions) error {
	c, err := o.Admin("")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	p, err := c.PauseRepair(ctx, &kvpb.PauseRepairRequest{By: o.By, Reason: o.Reason})
	if err != nil {
		return rpcError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, p)
	}
	fmt.Fprintln(o.IO.Out, "repair "+present.RepairPaused(p, time.Now()))
	if present.RepairInFlight(p) {
		fmt.Fprintln(o.IO.Out, present.RepairLine(p))
	}
	_, err = fmt.Fprintln(o.IO.Out, "kvctl repair resume goes on from the ranges done")
	return err
}

func runResume(ctx context.Context, o *PauseOptions) error {
	c, err := o.Admin("")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	p, err := c.ResumeRepair(ctx, &kvpb.ResumeRepairRequest{By: o.By})
	if err != nil {
		return rpcError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, p)
	}
	fmt.Fprintf(o.IO.Out, "repair resumed by %s\n", o.By)
	if present.RepairInFlight(p) {
		fmt.Fprintln(o.IO.Out, present.RepairLine(p))
	}
	return nil
}
