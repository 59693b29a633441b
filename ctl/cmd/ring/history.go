package ring

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// HistoryOptions are `ring history`'s flags.
type HistoryOptions struct {
	Deps
	// Limit is how many changes, newest first.
	Limit int
	// ID, when set, names the one change to show.
	ID uint64
}

// NewCmdHistory returns `kvctl ring history`. runF replaces the run step in tests.
func NewCmdHistory(f *cli.Factory, runF func(*HistoryOptions) error) *cobra.Command {
	o := &HistoryOptions{Deps: f.AdminDeps()}
	cmd := &cobra.Command{
		Use:   "history [CHANGE-ID] [-n N]",
		Short: "The last ring changes: outcome, duration, bytes, and each node's load predicted vs observed",
		Long: `List the last finished ring changes, newest first: outcome (done or aborted), who started
it, how long it took and the bytes its plan estimated, and for each node its replica load
(reads plus writes it served as a replica, per second) measured before the change, predicted
by the plan (each vnode's measured load moved with its token range to its new replicas) and
observed after it: over --prediction-window (kvnode flag, default 1m) starting
--prediction-delay (default 1m) after the commit. The error is (observed - predicted) /
predicted; a node off by more than 25% either way is flagged "OFF BY >25%".

The history is journaled in raft (the last 32 changes); a raft leader change while a change
is observed is taken up by the new leader, or the change says "not observed" and why.
Exit 4 when no change has finished yet or CHANGE-ID is not kept.`,
		Example: `  kvctl ring history
  kvctl ring history -n 1
  kvctl ring history 7 -o json | jq '.changes[0].nodes[] | {id, predicted, observed, off}'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Limit <= 0 {
				return cli.UsageErrorf("-n %d: want at least 1 change", o.Limit)
			}
			if len(args) == 1 {
				id, err := strconv.ParseUint(args[0], 10, 64)
				if err != nil || id == 0 {
					return cli.UsageErrorf("change id %q: want a positive number (kvctl ring history lists them)", args[0])
				}
				o.ID = id
			}
			if runF != nil {
				return runF(o)
			}
			return runHistory(cmd.Context(), o)
		},
	}
	cmd.Flags().IntVarP(&o.Limit, "limit", "n", 10, "how many changes, newest first")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the request")
	return cmd
}

func runHistory(ctx context.Context, o *HistoryOptions) error {
	c, err := o.Admin("")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resp, err := c.ChangeHistory(ctx, &kvpb.ChangeHistoryRequest{Limit: uint32(o.Limit), Id: o.ID})
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, resp)
	}
	for i, r := range resp.GetChanges() {
		if i > 0 {
			fmt.Fprintln(o.IO.Out)
		}
		for _, l := range present.PredictionLines(r) {
			if _, err := fmt.Fprintln(o.IO.Out, l); err != nil {
				return err
			}
		}
	}
	return nil
}

// lastPrediction prints the last finished change's prediction table after ring status, when
// the cluster keeps one (an older node, or none finished: nothing).
func lastPrediction(ctx context.Context, o Deps, c kvpb.AdminClient) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resp, err := c.ChangeHistory(ctx, &kvpb.ChangeHistoryRequest{Limit: 1})
	if err != nil || len(resp.GetChanges()) == 0 {
		return nil
	}
	fmt.Fprintln(o.IO.Out)
	for _, l := range present.PredictionLines(resp.GetChanges()[0]) {
		if _, err := fmt.Fprintln(o.IO.Out, l); err != nil {
			return err
		}
	}
	return nil
}
