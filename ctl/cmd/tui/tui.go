// Package tui is `kvctl tui`: the live console on a running cluster.
package tui

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/loadgen"
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
	// BenchKeys is the keyspace of the background bench (the keys `kvctl bench fill` writes).
	BenchKeys int64
}

// NewCmdTUI returns `kvctl tui`. runF replaces the run step in flag tests.
func NewCmdTUI(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Factory: f}
	cmd := &cobra.Command{
		Use:   "tui",
		Short: "Live console: node table, shard heatmap, ring changes in flight, actions",
		Long: `Opens the console on the cluster behind --addr (several addresses, a,b,c, are asked in
turn while one is down): one row per node, a heatmap of every vnode, ring changes in flight
and the event log. Actions (drain, add, rebalance, CPU profile, bench) each ask for
confirmation; --readonly disables them. Press ? for every key, q to quit.`,
		Example: `  # the console on a local cluster
  kvctl tui --addr 127.0.0.1:9091

  # any of three nodes, watch only
  kvctl tui --addr 10.0.0.1:9090,10.0.0.2:9090,10.0.0.3:9090 --readonly

  # a background bench (b) over the keys kvctl bench fill wrote
  kvctl bench fill --keys 50000 && kvctl tui --bench-keys 50000`,
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
	_ = cmd.Flags().MarkDeprecated("seeds", "give every address to --addr: --addr a,b,c")
	cmd.Flags().StringVar(&o.ProfileDir, "profile-dir", ".", "directory CPU profiles are written to")
	cmd.Flags().Int64Var(&o.BenchKeys, "bench-keys", 100_000, "keyspace of the background bench (b): keys bench:0.. as kvctl bench fill writes them")
	return cmd
}

func run(cmd *cobra.Command, o *Options) error {
	f := o.Factory
	seeds := append(f.Addrs(), o.Seeds...)
	src := console.NewAdminSource(console.AdminConfig{Seeds: seeds, Dial: f.Admin})
	live := &loadgen.Live{}
	acts := console.NewActions(f, o.ProfileDir, backgroundBench(f, live, strings.Join(seeds, ","), o.BenchKeys))
	acts.Chart = live.Chart
	defer acts.Close()
	return console.Run(cmd.Context(), console.Options{
		Source:   src,
		Actions:  acts,
		Readonly: o.Readonly,
		Hint:     "cluster at " + strings.Join(seeds, ", ") + " · press ? for keys",
	})
}

// backgroundBench runs the console's bench action: 90% GET / 10% PUT at the chosen rate over
// keys bench:0..keys-1 through the node at addr (a list: the first that answers), until the
// console stops it, through live (which follows the cluster's events for the chart).
func backgroundBench(f *cli.Factory, live *loadgen.Live, addr string, keys int64) console.BenchFunc {
	return func(ctx context.Context, rate int) (string, error) {
		target, opts, err := f.Dial(addr)
		if err != nil {
			return "", err
		}
		t, err := loadgen.DialGRPCTarget(target, 16, 0, 0, opts...)
		if err != nil {
			return "", err
		}
		defer t.Close()
		cfg := loadgen.DefaultConfig()
		cfg.Rate = float64(rate)
		cfg.Warmup = 0
		cfg.Duration = 365 * 24 * time.Hour // until the console stops it
		cfg.Workload = loadgen.Mix{Get: 9, Put: 1}
		cfg.Keys = max(keys, 1)
		cfg.MaxLag = time.Hour // a background load, not a measurement
		admin, err := f.Admin("")
		if err != nil {
			admin = nil // no events: the chart still draws
		}
		res, err := live.Run(ctx, cfg, t, admin)
		if err != nil {
			return "", err
		}
		return res.Line(), nil
	}
}
