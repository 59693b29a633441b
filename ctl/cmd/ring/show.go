package ring

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// ShowOptions are `ring show`'s flags.
type ShowOptions struct {
	Deps
	// NoCounts skips asking every node for its key count and bytes.
	NoCounts bool
}

// NewCmdShow returns `kvctl ring show`. runF replaces the run step in tests.
func NewCmdShow(f *cli.Factory, runF func(*ShowOptions) error) *cobra.Command {
	o := &ShowOptions{Deps: f.AdminDeps()}
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Per node: vnodes, share of the token space, replica share, keys, bytes, state",
		Long: `Show the ring the contacted node routes by: its epoch, the replication factor, and per node
the vnodes it owns, its share of the token space as primary, its share as any replica (the
shares sum to N), its key count and bytes on disk, and its state (UP, JOINING, LEAVING, DOWN).
A ring change in flight is shown below the table.`,
		Example: `  kvctl ring show
  kvctl ring show --no-counts         skip asking every node for its counts
  kvctl ring show -o json | jq '.ownership[] | {id, share}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(o)
			}
			return runShow(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.NoCounts, "no-counts", false, "do not ask every node for its key count and bytes")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the request")
	return cmd
}

func runShow(ctx context.Context, o *ShowOptions) error {
	c, err := o.Admin("")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resp, err := c.Ring(ctx, &kvpb.RingRequest{WithCounts: !o.NoCounts})
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, resp)
	}
	return PrintRing(o.IO, resp, !o.NoCounts)
}

// PrintRing renders a RingResponse as the ring table.
func PrintRing(ios *cli.IOStreams, resp *kvpb.RingResponse, counts bool) error {
	r := resp.GetRing()
	fmt.Fprintf(ios.Out, "ring epoch %d, replicas %d, %d members\n", r.GetEpoch(), r.GetReplicas(), len(r.GetMembers()))
	t := cli.NewTable(ios, "NODE", "STATE", "VNODES", "SHARE", "REPLICA-SHARE", "KEYS", "BYTES", "NOTE")
	for _, o := range resp.GetOwnership() {
		keys, bytes := "-", "-"
		if counts && o.GetError() == "" {
			keys, bytes = fmt.Sprint(o.GetKeys()), present.Bytes(o.GetBytes())
		}
		t.Row(o.GetId(), present.NodeState(o.GetState()), o.GetVnodes(), pct(o.GetShare()), pct(o.GetReplicaShare()), keys, bytes, o.GetError())
	}
	if err := t.Render(); err != nil {
		return err
	}
	if ch := resp.GetChange(); inFlight(ch) {
		fmt.Fprintf(ios.Out, "change %d in flight: %s, %s\n", ch.GetId(), present.Change(ch.GetPlan().GetRequest()), summary(ch))
	} else {
		fmt.Fprintln(ios.Out, "no change in flight")
	}
	return nil
}
