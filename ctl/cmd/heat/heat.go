// Package heat holds `kvctl heat`: the cluster's load per token range over time, merged from
// every node's heat history, drawn as a heatmap that fits the terminal with the events on its
// time axis, or as JSON (columns, rows, values, events).
package heat

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/oncall"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// Metrics are the --metric names, in the order of their proto enum.
var metrics = map[string]kvpb.HeatMetric{
	"ops":    kvpb.HeatMetric_HEAT_METRIC_OPS,
	"reads":  kvpb.HeatMetric_HEAT_METRIC_READS,
	"writes": kvpb.HeatMetric_HEAT_METRIC_WRITES,
	"bytes":  kvpb.HeatMetric_HEAT_METRIC_BYTES,
	"p99":    kvpb.HeatMetric_HEAT_METRIC_P99,
	"errors": kvpb.HeatMetric_HEAT_METRIC_ERRORS,
}

// Options are heat's flags.
type Options struct {
	IO      *cli.IOStreams
	Factory *cli.Factory
	Since   time.Duration
	Metric  string
	Step    time.Duration
	Width   int
	Timeout time.Duration
	// Now is the clock the window ends at; nil = time.Now.
	Now func() time.Time
}

// NewCmdHeat returns `kvctl heat`. runF replaces the run step in tests.
func NewCmdHeat(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Factory: f, Since: time.Hour, Metric: "ops", Timeout: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "heat",
		Short: "Token range x time heatmap of the cluster's load, with events on the time axis",
		Long: `Draw the load of the token space over time, summed over every answering node (what
each coordinated): rows are token ranges (the table groups the 256 ranges of a token's top
byte by 16; JSON keeps all 256), columns are time steps. Each node keeps 10 s steps for an
hour, 1 min steps for a day and 10 min steps for a week, and saves them in its data directory;
a step no node saw (all down, or before their history) is "no data" (- in the table, null in
JSON), not zero. p99 is the higher of the read and write p99 (the highest over the nodes and
finer steps: a bound), from a histogram of 8 bins per power of two (at most 12.5% high); a
step of a range with fewer than 50 operations has no p99 (0, drawn as a zero).

JSON "owners" is, per row and column, the node that owned most of the row's tokens at the
step's end as the nodes saw the ring ("" unknown): where it changes, a ring change moved it.

Without --step, the finest step whose history reaches --since. The table fits the terminal
(--width to choose): adjacent steps are merged when there are more than columns.`,
		Example: `  kvctl heat
  kvctl heat --since 24h --metric p99
  kvctl heat --since 10m --step 10s -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&o.Since, "since", o.Since, "how far back (up to 168h)")
	fl.StringVar(&o.Metric, "metric", o.Metric, "ops, reads, writes, bytes, p99 or errors")
	fl.DurationVar(&o.Step, "step", 0, "10s, 1m or 10m (default: the finest that reaches --since)")
	fl.IntVar(&o.Width, "width", 0, "draw the table this many columns wide (default: the terminal's, 100 when piped)")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the calls to the nodes")
	_ = cmd.RegisterFlagCompletionFunc("metric", cobra.FixedCompletions([]string{"ops", "reads", "writes", "bytes", "p99", "errors"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("step", cobra.FixedCompletions([]string{"10s", "1m", "10m"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *Options) validate() error {
	switch _, ok := metrics[o.Metric]; {
	case !ok:
		return cli.UsageErrorf("--metric %q: want ops, reads, writes, bytes, p99 or errors", o.Metric)
	case o.Since <= 0 || o.Since > 7*24*time.Hour:
		return cli.UsageErrorf("--since %v: want more than 0 and up to 168h", o.Since)
	case o.Step != 0 && o.Step != 10*time.Second && o.Step != time.Minute && o.Step != 10*time.Minute:
		return cli.UsageErrorf("--step %v: want 10s, 1m or 10m", o.Step)
	case o.Width < 0:
		return cli.UsageErrorf("--width %d: want a positive width", o.Width)
	case o.Timeout <= 0:
		return cli.UsageErrorf("--timeout must be positive")
	}
	return nil
}

func (o *Options) width() int {
	switch {
	case o.Width > 0:
		return o.Width
	case o.IO.OutWidth != nil && o.IO.OutWidth() > 0:
		return o.IO.OutWidth()
	}
	return 100
}

func run(ctx context.Context, o *Options) error {
	if w := o.width(); !o.Factory.JSON() && w < oncall.HeatMinWidth {
		return cli.UsageErrorf("the terminal is %d columns wide: the heat table needs %d (widen it, or use --width or -o json)", w, oncall.HeatMinWidth)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	ac, err := o.Factory.Admin("")
	if err != nil {
		return err
	}
	st, err := ac.Status(ctx, &kvpb.StatusRequest{})
	if err != nil {
		return cli.RPCError(o.Factory.Addr, err)
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	req := &kvpb.HeatRequest{SinceUnixNanos: now().Add(-o.Since).UnixNano(), StepSeconds: uint32(o.Step / time.Second), Metric: metrics[o.Metric]}
	var reps []*kvpb.HeatResponse
	for _, n := range st.GetNodes() {
		if n.GetError() != "" {
			fmt.Fprintf(o.IO.ErrOut, "skipping %s: %s\n", n.GetId(), n.GetError())
			continue
		}
		c, err := o.Factory.Admin(n.GetGrpcAddr())
		if err != nil {
			return err
		}
		r, err := c.Heat(ctx, req)
		if err != nil {
			fmt.Fprintf(o.IO.ErrOut, "skipping %s: %s\n", n.GetId(), present.RPC(err))
			continue
		}
		reps = append(reps, r)
	}
	if len(reps) == 0 {
		return fmt.Errorf("no node of the ring answers")
	}
	res, err := oncall.MergeHeat(reps, o.Metric)
	if errors.Is(err, oncall.ErrNoData) {
		return fmt.Errorf("%w: %w", cli.ErrNotFound, err)
	}
	if err != nil {
		return err
	}
	if o.Factory.JSON() {
		return cli.PrintJSON(o.IO.Out, res)
	}
	return oncall.DrawHeat(o.IO.Out, res, o.width())
}
