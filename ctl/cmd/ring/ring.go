// Package ring is `kvctl ring`: show the ring, add and drain nodes, and follow, throttle or
// abort the ring change in flight.
package ring

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// errInterrupted: the operator stopped watching (Ctrl-C); the change goes on.
var errInterrupted = errors.New("stopped watching")

// Deps is what every ring command needs from the factory.
type Deps = cli.AdminDeps

// NewCmdRing returns `kvctl ring` with its subcommands.
func NewCmdRing(f *cli.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ring",
		Short: "Show the ring, add or drain nodes, follow and control a ring change",
		Long: `The ring maps every key to N replicas: each node owns some vnodes (tokens), and a key's
replicas are the first N distinct nodes clockwise from the key's token.

Adding or draining a node, and handing vnodes from hot nodes to cooler ones (rebalance), is
a ring change: the cluster journals it in raft, streams the token ranges that move from a
current replica to each new owner (throttled by --rate), keeps writing to old and new owners
alike while data moves, and flips the ring to the next epoch once every range has arrived. Only one change is in flight at a time. A change
survives crashes of the streaming nodes and of the raft leader; "kvctl ring abort" returns
the cluster to the old ring.

Rates are in MB/s per receiving node, 1 MB = 2^20 bytes. A change starts at --rate, or at the
nodes' default (kvnode --change-rate, 64 MB/s) when --rate is unset or 0. While it runs,
"kvctl ring rate" changes its throttle (--node for one receiver, --unlimited to lift it),
"kvctl ring parallel" the ranges each receiver pulls at once, and "kvctl ring pause" stops it
streaming until "kvctl ring resume": all journaled in raft, taken up within a second.`,
		Example: `  kvctl ring show                              vnodes, ownership, keys and bytes per node
  kvctl ring add n4=10.0.0.4:9090 --dry-run    what would move, and where
  kvctl ring add n4=10.0.0.4:9090 --rate 50    plan, confirm, stream, show progress
  kvctl ring drain n2 --yes                    stream n2's ranges away, then retire it
  kvctl ring rebalance --dry-run               which vnodes would leave the hot nodes
  kvctl ring status                            follow the change in flight
  kvctl ring rate 100                          let the change stream faster
  kvctl ring pause --reason "p99 over SLO"     stop streaming; kvctl ring resume goes on
  kvctl ring abort                             cancel it; the old ring stays
  kvctl ring history                           the last changes: load predicted vs observed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		NewCmdShow(f, nil),
		NewCmdAdd(f, nil),
		NewCmdRemove(f, nil),
		NewCmdRebalance(f, nil),
		NewCmdStatus(f, nil),
		NewCmdAbort(f, nil),
		NewCmdRate(f, nil),
		NewCmdParallel(f, nil),
		NewCmdPause(f, nil),
		NewCmdResume(f, nil),
		NewCmdHistory(f, nil),
	)
	return cmd
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// inFlight tells whether p is a change (it has an id) that has started and not finished.
func inFlight(p *kvpb.ChangeProgress) bool {
	return p.GetId() != 0 && present.InFlight(p)
}
