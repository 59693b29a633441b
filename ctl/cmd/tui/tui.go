// Package tui is `kvctl tui`: the live console on a running cluster.
package tui

import (
	"strings"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/proto/kvpb"
	console "ringkv/tui"
)

// Options of `kvctl tui`.
type Options struct {
	IO      *cli.IOStreams
	Factory *cli.Factory
	// Seeds are extra node addresses (besides --addr) asked for status and ring.
	Seeds      []string
	Readonly   bool
	ProfileDir string
}

// NewCmdTUI returns `kvctl tui`. runF replaces the run step in flag tests.
func NewCmdTUI(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Factory: f}
	cmd := &cobra.Command{
		Use:   "tui",
		Short: "Live console: node table, shard heatmap, ring changes in flight, actions",
		Long: `Opens the console on the cluster behind --addr: one row per node, a heatmap of every
vnode, ring changes in flight and the event log. Actions (drain, add, rebalance, CPU profile,
bench) each ask for confirmation; --readonly disables them. Press ? for every key, q to quit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !o.IO.InTTY || !o.IO.OutTTY {
				return cli.UsageErrorf("the console needs a terminal on stdin and stdout")
			}
			if runF != nil {
				return runF(o)
			}
			return run(cmd, o)
		},
	}
	cmd.Flags().BoolVar(&o.Readonly, "readonly", false, "disable every action")
	cmd.Flags().StringSliceVar(&o.Seeds, "seeds", nil, "more node addresses to ask when --addr is down")
	cmd.Flags().StringVar(&o.ProfileDir, "profile-dir", ".", "directory CPU profiles are written to")
	return cmd
}

func run(cmd *cobra.Command, o *Options) error {
	f := o.Factory
	seeds := append([]string{f.Addr}, o.Seeds...)
	src := console.NewAdminSource(console.AdminConfig{Seeds: seeds, Dial: f.Admin})
	acts := &console.AdminActions{
		Admin:      func() (kvpb.AdminClient, error) { return f.Admin("") },
		Dial:       f.Admin,
		ProfileDir: o.ProfileDir,
	}
	defer acts.Close()
	return console.Run(cmd.Context(), console.Options{
		Source:   src,
		Actions:  acts,
		Readonly: o.Readonly,
		Hint:     "cluster at " + strings.Join(seeds, ", ") + " · press ? for keys",
	})
}
