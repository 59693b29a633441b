package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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
--start S writes keys S..N-1 only: a large fill split into key ranges, one run each.
Keys whose write failed (a timeout, a 504) are written again at the end, up to 3 more times
1, 2 and 4 s apart; the fill fails only if some are still not written.`,
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
	var failed failedKeys
	cfg.OnError = func(_ loadgen.Op, key []byte, _ loadgen.Kind) { failed.add(key) }
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
	n := res.ErrorCount()
	if n == 0 {
		return nil
	}
	keys, all := failed.get()
	if !all {
		return fmt.Errorf("fill: %d of %d writes failed (%v), too many to write again: run the fill again", n, want, res.Errors)
	}
	left := retryFill(ctx, t, keys, make([]byte, cfg.ValueSize.Max), cfg.Timeout, cfg.Connections, func(attempt int, keys []string) {
		fmt.Fprintf(o.IO.ErrOut, "writing again the %d keys whose write failed (attempt %d of %d)\n", len(keys), attempt, fillAttempts)
	})
	if len(left) > 0 {
		return fmt.Errorf("fill: %d of %d writes failed (%v); %d still failed after %d more attempts, first %s",
			n, want, res.Errors, len(left), fillAttempts, left[0])
	}
	w := o.IO.Out
	if o.jsonOut() {
		w = o.IO.ErrOut // stdout holds the report alone
	}
	fmt.Fprintf(w, "wrote again the %d keys whose first write failed: every key of the fill is written\n", len(keys))
	return nil
}

// fillAttempts is how many more times fill writes the keys whose write failed, fillPause
// apart (doubling): a cluster that refused writes for a second (a flush, a leader's election)
// leaves no hole in the keyspace.
const (
	fillAttempts = 3
	fillPause    = time.Second
)

// maxRetriedKeys bounds the failed keys a fill keeps to write again; past it the fill fails as
// a whole (the cluster is not taking writes).
const maxRetriedKeys = 100_000

// failedKeys collects the keys whose write failed, up to maxRetriedKeys. Safe for concurrent
// use.
type failedKeys struct {
	mu       sync.Mutex
	keys     []string
	overflow bool
}

func (f *failedKeys) add(key []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.keys) < maxRetriedKeys {
		f.keys = append(f.keys, string(key))
	} else {
		f.overflow = true
	}
}

// get returns the keys, sorted; all is false when some did not fit.
func (f *failedKeys) get() (keys []string, all bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	slices.Sort(f.keys)
	return f.keys, !f.overflow
}

// retryFill writes value under keys again, up to fillAttempts rounds (progress is told of
// each), and returns the keys whose write still failed, sorted.
func retryFill(ctx context.Context, t loadgen.Target, keys []string, value []byte, timeout time.Duration, conns int, progress func(attempt int, keys []string)) []string {
	pause := fillPause
	for attempt := 1; attempt <= fillAttempts && len(keys) > 0; attempt++ {
		if attempt > 1 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return keys
			}
			pause *= 2
		}
		progress(attempt, keys)
		keys = putAll(ctx, t, keys, value, timeout, conns)
	}
	return keys
}

// putAll writes value under every key on up to conns connections of t (connection w for
// worker w, one request in flight each, as loadgen.Target asks) and returns the keys whose
// write failed, sorted.
func putAll(ctx context.Context, t loadgen.Target, keys []string, value []byte, timeout time.Duration, conns int) []string {
	var next atomic.Int64
	var mu sync.Mutex
	var left []string
	var wg sync.WaitGroup
	for w := range min(conns, len(keys)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(keys) || ctx.Err() != nil {
					return
				}
				rctx, cancel := context.WithTimeout(ctx, timeout)
				kind := t.Put(rctx, w, keys[i], value)
				cancel()
				if kind.IsError() {
					mu.Lock()
					left = append(left, keys[i])
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return keys // cut short: which were written is not known
	}
	slices.Sort(left)
	return left
}
