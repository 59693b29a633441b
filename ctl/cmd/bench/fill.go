package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/loadgen"
	"ringkv/proto/kvpb"
)

// NewCmdFill returns `kvctl bench fill`: write every key of the keyspace once, as fast as the
// cluster takes it, so GET runs hit real data. runF replaces the run step in tests.
func NewCmdFill(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{
		IO:      f.IO,
		Addr:    func() string { return f.Addr },
		Dial:    f.Dial,
		HTTPTLS: f.HTTPTLS,
		Admin:   func() (kvpb.AdminClient, error) { return f.Admin("") },
		JSON:    f.JSON,
		Config:  loadgen.DefaultConfig(),
	}
	o.Config.Connections = 64
	cmd := &cobra.Command{
		Use:   "fill",
		Short: "Write every key of a bench keyspace once, in parallel, with rate and ETA",
		Long: `fill writes keys <key-prefix>0 ... <key-prefix>N-1 once each with PUTs spread over
--connections parallel connections (each takes the next unwritten key), printing the rate
and the ETA on stderr every second. Use the same --keys and --key-prefix as the bench runs.
--start S writes keys S..N-1 only: a large fill split into key ranges, one run each.`,
		Example: `  kvctl bench fill --keys 1000000
  kvctl bench fill --keys 10000000 --start 5000000   # the second half of a 10M-key fill
  kvctl bench fill --keys 100000 --value-size 1000 --connections 128 --ack 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.completeFill(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.runFill(cmd.Context())
		},
	}
	addLoadFlags(cmd, o)
	cmd.Flags().Int64Var(&o.Config.KeyStart, "start", 0, "first key to write (keys start..keys-1): a fill split into key ranges")
	return cmd
}

func (o *Options) completeFill() error {
	if err := o.completeLoadFlags(); err != nil {
		return err
	}
	c := &o.Config
	c.Rate, c.Warmup, c.Requests = 0, 0, c.Keys-c.KeyStart
	c.Workload = loadgen.Mix{Put: 1}
	c.KeyDist = loadgen.KeyDist{Kind: loadgen.DistSequential}
	c.Duration = 365 * 24 * time.Hour // bounded by Requests
	if err := c.Validate(); err != nil {
		return cli.UsageErrorf("%s", err)
	}
	return nil
}

func (o *Options) runFill(ctx context.Context) error {
	t, name, closeT, err := o.target(ctx)
	if err != nil {
		return err
	}
	defer closeT()
	cfg := o.Config
	want := cfg.Requests
	var done, errs int64
	start := time.Now()
	cfg.OnInterval = func(iv loadgen.Interval) {
		done += iv.Requests
		errs += iv.Errors
		eta := "-"
		if iv.Rate > 0 {
			eta = present.ETA(float64(want-done) / iv.Rate)
		}
		line := fmt.Sprintf("filled %d/%d keys (%.0f%%), %.0f keys/s, %d errors, ETA %s",
			done, want, 100*float64(done)/float64(want), iv.Rate, errs, eta)
		if o.IO.ErrTTY {
			fmt.Fprintf(o.IO.ErrOut, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(o.IO.ErrOut, line)
		}
	}
	res, err := loadgen.Run(ctx, cfg, t)
	if o.IO.ErrTTY {
		fmt.Fprint(o.IO.ErrOut, "\r\033[K")
	}
	if err != nil {
		return cli.UsageErrorf("%s", err)
	}
	if o.jsonOut() {
		if err := cli.PrintJSON(o.IO.Out, res.Report(name)); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.IO.Out, "filled %d keys %s..%s%d at %s in %s: %.0f keys/s, p99 %s, %d errors\n",
			res.Requests, cfg.KeyPrefix+strconv.FormatInt(cfg.KeyStart, 10), cfg.KeyPrefix, cfg.Keys-1, name, present.Elapsed(time.Since(start)),
			res.Achieved, fmtMs(time.Duration(res.Corrected.ValueAtPercentile(99))), res.ErrorCount())
	}
	if res.Interrupted {
		return fmt.Errorf("fill interrupted after %d of %d keys", res.Requests, want)
	}
	if n := res.ErrorCount(); n > 0 {
		return fmt.Errorf("fill: %d of %d writes failed (%v)", n, want, res.Errors)
	}
	return nil
}
