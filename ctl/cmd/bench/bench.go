// Package bench holds `kvctl bench`: constant-rate load with corrected HDR latency, find-max,
// fill and diff, on top of the loadgen library.
package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/ctl/profile"
	"ringkv/loadgen"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// Options are bench's flags, parsed into Config by complete.
type Options struct {
	IO *cli.IOStreams
	// Addr is the gRPC address of the node to load (kvctl's --addr).
	Addr func() string
	// Dial gives the gRPC target and dial options (TLS, secret) for an address (cli.Factory.Dial).
	Dial func(addr string) (string, []grpc.DialOption, error)
	// HTTPTLS gives the TLS config of the HTTP target (nil: plain HTTP; cli.Factory.HTTPTLS).
	HTTPTLS func() (*tls.Config, error)
	Admin   func() (kvpb.AdminClient, error)
	// JSON tells whether -o json was asked for.
	JSON func() bool

	Config loadgen.Config

	Workload, KeyDist, ValueSize string
	Ack, From                    int
	Target                       string
	HTTPAddr                     string

	// MaxErrors is --max-errors, in percent.
	MaxErrors float64

	// Record is --record: every acknowledged write is appended to this file (JSON lines) for
	// kvctl bench check.
	Record  string
	Latency bool
	JSONOut bool
	Hgrm    string
	Hlog    string
	Hist    string
	ByNode  bool
	Quiet   bool
	// Events is --events: follow the cluster through the Admin API, record its events and
	// cut the report into phases by them.
	Events bool
	// Chart is --chart: p99 and rate per second with the events marked, after the summary.
	Chart    bool
	FindMax  bool
	SLO      string
	FindMaxC loadgen.FindMaxConfig
	// Profile lists the profile kinds captured from every node during the measured phase
	// (cpu, mutex, block, heap, allocs, goroutine, trace), written to ProfileDir.
	Profile    []string
	ProfileDir string
	// Factory resolves the cluster's nodes and dials them for --profile.
	Factory *cli.Factory

	slo loadgen.SLO
	// liveMu orders the live line (the run's ticker) and the event lines (the follower) on
	// stderr, which are written from two goroutines.
	liveMu sync.Mutex
}

// NewCmdBench returns `kvctl bench` with its subcommands fill and diff. runF replaces the run
// step in tests.
func NewCmdBench(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{
		IO:       f.IO,
		Addr:     func() string { return f.Addr },
		Dial:     f.Dial,
		HTTPTLS:  f.HTTPTLS,
		Admin:    func() (kvpb.AdminClient, error) { return f.Admin("") },
		JSON:     f.JSON,
		Config:   loadgen.DefaultConfig(),
		FindMaxC: loadgen.DefaultFindMaxConfig(),
		Factory:  f,
	}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load a cluster at a constant rate and report corrected latency percentiles",
		Long: `kvctl bench is a load generator built into kvctl, in the manner of wrk2.

With --rate R (open model) request i is sent at start + i/R whatever happened to the
earlier ones, and its latency is measured from that intended start: when the cluster
stalls, every request that should have been sent during the stall counts the wait
(coordinated omission corrected). --rate 0 runs a closed loop: each connection sends
its next request when the previous one answers, as fast as the cluster allows.

The summary shows the asked and achieved rate, the latency ladder (p50 ... p99.999,
max), mean/stdev, errors by kind (timeout, unavailable = 504, 4xx, connection, other)
and the generator's own CPU. A live line on stderr shows every second: achieved rate,
p50/p99 of that second, errors, send lag. If the generator ends behind its own
schedule (it could not offer the asked rate), or more than --max-errors percent of
the requests failed, the result says INVALID and why, and kvctl exits 1. The summary
leads with the success ratio; failed requests are counted by kind and kept out of the
latency histogram (a refused connection answers fast, which is no latency).

Keys are --key-prefix + a number below --keys. GETs of keys never written count as
"not found", not as errors: fill the keyspace first with kvctl bench fill.

--ack and --from apply to reads and writes alike: --ack 2 --from 3 makes every PUT wait
for two replicas and every GET read a quorum of two. --record FILE appends every
acknowledged write (key and value; each value carries its request's number, so no two
are alike) to FILE; kvctl bench check FILE then reads every recorded key back and
counts the acknowledged writes that were lost. With --certs-dir the HTTP target speaks
HTTPS and presents the client certificate, as the gRPC target does.`,
		Example: `  # 10 s of GETs at 5000 req/s over 32 gRPC connections, after 2 s of warmup
  kvctl bench fill --keys 100000
  kvctl bench --rate 5000 --connections 32 --duration 10s

  # 90% reads, 10% writes of 100-1000 byte values, skewed keys, with ack=1
  kvctl bench --rate 2000 --workload mixed:get=90,put=10 --value-size 100-1000 \
      --key-dist zipf:1.1 --ack 1 --from 3

  # the HTTP API instead of gRPC, closed loop, full percentile spectrum
  kvctl bench --target http --rate 0 --connections 64 --latency

  # files for plotting: percentile distribution and one histogram per second
  kvctl bench --rate 3000 --hgrm run.hgrm --hlog run.hlog

  # latency and errors per operation and per primary node of each key
  kvctl bench --rate 3000 --by-node

  # the highest rate whose p99 stays under 10 ms (ramp, then bisection)
  kvctl bench --find-max --slo p99=10ms,p999=50ms --step 5s

  # CPU and mutex profiles from every node during the measured 30 s, files named after the run
  kvctl bench --rate 5000 --duration 30s --profile cpu,mutex --profile-dir prof/

  # a fault drill: quorum reads and ack=2 writes, every acknowledged write recorded,
  # then read back at a quorum
  kvctl bench --rate 200 --workload mixed:get=50,put=50 --key-dist sequential \
      --keys 10000000 --ack 2 --from 3 --record acked.jsonl --max-errors 0
  kvctl bench check acked.jsonl --ack 2 --from 3

  # compare two runs
  kvctl bench --rate 5000 --json > before.json
  kvctl bench --rate 5000 --json > after.json
  kvctl bench diff before.json after.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.complete(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return o.run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	addLoadFlags(cmd, o)
	fl.Float64Var(&o.Config.Rate, "rate", o.Config.Rate, "requests per second over all connections; 0 = closed loop (max rate)")
	fl.DurationVar(&o.Config.Duration, "duration", o.Config.Duration, "measured duration (per step with --find-max: see --step)")
	fl.DurationVar(&o.Config.Warmup, "warmup", o.Config.Warmup, "load run first and left out of the results")
	fl.StringVar(&o.Workload, "workload", "get", "get, put, delete or mixed:get=90,put=10[,delete=N]")
	fl.StringVar(&o.KeyDist, "key-dist", "uniform", "key distribution: uniform, zipf:S (S > 1) or sequential")
	fl.Float64Var(&o.MaxErrors, "max-errors", 100*o.Config.MaxErrors, "percent of requests that may fail; past it the result is invalid and kvctl exits 1")
	fl.DurationVar(&o.Config.MaxLag, "max-lag", o.Config.MaxLag, "mark the result invalid when the generator ends this far behind schedule")
	fl.Uint64Var(&o.Config.Seed, "seed", 0, "seed of key and value choices")
	fl.DurationVar(&o.Config.Spin, "spin", 0, "closed loop over HTTP: busy-poll up to this long for answers before sleeping (e.g. 50us; costs a whole generator core, spares the node a wake-up of the generator per answer)")
	fl.StringVar(&o.Record, "record", "", "append every acknowledged write to `FILE` (JSON lines) for kvctl bench check")
	fl.BoolVar(&o.Latency, "latency", false, "print the detailed percentile spectrum")
	fl.BoolVar(&o.JSONOut, "json", false, "print the result as JSON (same as -o json)")
	fl.StringVar(&o.Hgrm, "hgrm", "", "write the corrected latency in HdrHistogram's percentile-distribution format (.hgrm) to `FILE`")
	fl.StringVar(&o.Hist, "hist", "", "write every non-empty bucket of the corrected latency histogram (`FILE`: \"µs count\" per line), for exact post-processing")
	fl.StringVar(&o.Hlog, "hlog", "", "write an HdrHistogram interval log, one histogram per second, to `FILE`")
	fl.BoolVar(&o.ByNode, "by-node", false, "break latency and errors down per operation and per primary node of the key")
	fl.BoolVar(&o.Quiet, "quiet", false, "no live line on stderr")
	fl.BoolVar(&o.Chart, "chart", false, "after the summary, draw p99 and achieved rate per second with the events marked, fitted to the terminal (plain series when stdout is not a terminal)")
	fl.BoolVar(&o.Events, "events", true, "follow the cluster (ring changes, members DOWN/UP, repairs) and split the report into phases by its events")
	fl.StringSliceVar(&o.Profile, "profile", nil, "capture these profiles from every node during the measured phase: cpu,mutex,block,heap,allocs,goroutine,trace")
	fl.StringVar(&o.ProfileDir, "profile-dir", ".", "directory for --profile files (bench-<time>-<node>-<kind>.pb.gz)")
	fl.BoolVar(&o.FindMax, "find-max", false, "search the highest rate that holds --slo")
	fl.StringVar(&o.SLO, "slo", "p99=10ms", "objectives for --find-max: p50=, p99=, p999=, max= durations, comma-separated")
	fl.DurationVar(&o.FindMaxC.Step, "step", o.FindMaxC.Step, "measured duration of each --find-max step")
	fl.Float64Var(&o.FindMaxC.Start, "start", o.FindMaxC.Start, "first rate of --find-max")
	fl.Float64Var(&o.FindMaxC.Precision, "precision", o.FindMaxC.Precision, "--find-max stops when the bracket is this narrow (0.05 = 5%)")
	fl.IntVar(&o.FindMaxC.Retries, "retries", o.FindMaxC.Retries, "rerun a --find-max step that failed in its tail only (median within the slo) up to N times")

	_ = cmd.RegisterFlagCompletionFunc("profile", cli.CompleteWords(profile.Kinds...))
	_ = cmd.RegisterFlagCompletionFunc("target", cli.CompleteWords("grpc", "http"))
	cmd.AddCommand(NewCmdFill(f, nil), NewCmdDiff(f, nil), NewCmdCheck(f, nil))
	return cmd
}

// addLoadFlags adds the flags bench and fill share.
func addLoadFlags(cmd *cobra.Command, o *Options) {
	fl := cmd.Flags()
	fl.IntVarP(&o.Config.Connections, "connections", "c", o.Config.Connections, "connections, each with one request in flight")
	fl.Int64Var(&o.Config.Keys, "keys", o.Config.Keys, "size of the keyspace")
	fl.StringVar(&o.Config.KeyPrefix, "key-prefix", o.Config.KeyPrefix, "prefix of every key")
	fl.StringVar(&o.ValueSize, "value-size", "100", "value size in bytes: N or MIN-MAX")
	fl.IntVar(&o.Ack, "ack", 0, "replicas that must answer (0 = the cluster's default)")
	fl.IntVar(&o.From, "from", 0, "replicas asked (0 = the replication factor)")
	fl.StringVar(&o.Target, "target", "grpc", "API to load: grpc or http")
	fl.StringVar(&o.HTTPAddr, "http", "", "HTTP API address for --target http (default: asked from the node)")
	fl.DurationVar(&o.Config.Timeout, "timeout", o.Config.Timeout, "deadline of each request")
}

// complete parses the flag strings into Config and validates.
func (o *Options) complete(cmd *cobra.Command) error {
	var err error
	if o.Config.Workload, err = loadgen.ParseWorkload(o.Workload); err != nil {
		return cli.UsageErrorf("--workload: %s", err)
	}
	if o.Config.KeyDist, err = loadgen.ParseKeyDist(o.KeyDist); err != nil {
		return cli.UsageErrorf("--key-dist: %s", err)
	}
	if err := o.completeLoadFlags(); err != nil {
		return err
	}
	if o.MaxErrors < 0 || o.MaxErrors > 100 {
		return cli.UsageErrorf("--max-errors %g: want a percent in [0, 100]", o.MaxErrors)
	}
	o.Config.MaxErrors = o.MaxErrors / 100
	if o.FindMax {
		if o.slo, err = loadgen.ParseSLO(o.SLO); err != nil {
			return cli.UsageErrorf("--slo: %s", err)
		}
		if cmd.Flags().Changed("rate") {
			return cli.UsageErrorf("--find-max chooses the rates: use --start, not --rate")
		}
	}
	for _, k := range o.Profile {
		if !slices.Contains(profile.Kinds, k) {
			return cli.UsageErrorf("--profile %q: want some of %s", k, strings.Join(profile.Kinds, ","))
		}
	}
	if o.Config.Spin > 0 && (o.Target != "http" || o.Config.Rate > 0 || o.FindMax) {
		return cli.UsageErrorf("--spin applies to the closed loop over HTTP only (--target http --rate 0)")
	}
	if len(o.Profile) > 0 && o.FindMax {
		return cli.UsageErrorf("--profile goes with a constant-rate run, not --find-max")
	}
	if o.Chart && (o.FindMax || o.jsonOut()) {
		return cli.UsageErrorf("--chart draws after a constant-rate run's summary, not with --find-max or -o json (the JSON has every second in seconds)")
	}
	if o.Record != "" && o.FindMax {
		return cli.UsageErrorf("--record goes with a constant-rate run, not --find-max")
	}
	if err := o.Config.Validate(); err != nil {
		return cli.UsageErrorf("%s", err)
	}
	return nil
}

// completeLoadFlags checks the flags addLoadFlags defines (shared by bench and bench fill).
func (o *Options) completeLoadFlags() error {
	var err error
	if o.Config.ValueSize, err = loadgen.ParseSize(o.ValueSize); err != nil {
		return cli.UsageErrorf("--value-size: %s", err)
	}
	switch o.Target {
	case "grpc", "http":
	default:
		return cli.UsageErrorf("--target %q: want grpc or http", o.Target)
	}
	if o.Ack < 0 || o.From < 0 || (o.From > 0 && o.Ack > o.From) {
		return cli.UsageErrorf("--ack %d --from %d: want 0 <= ack <= from", o.Ack, o.From)
	}
	return nil
}

func (o *Options) jsonOut() bool { return o.JSONOut || (o.JSON != nil && o.JSON()) }

// target opens the target the flags name; close it when done.
func (o *Options) target(ctx context.Context) (loadgen.Target, string, func(), error) {
	if o.Target == "http" {
		addr := o.HTTPAddr
		if addr == "" {
			admin, err := o.Admin()
			if err != nil {
				return nil, "", nil, err
			}
			info, err := admin.NodeInfo(ctx, &kvpb.NodeInfoRequest{})
			if err != nil {
				return nil, "", nil, fmt.Errorf("ask the node for its HTTP address (or pass --http): %w", cli.RPCError(o.Addr(), err))
			}
			addr = info.GetHttpAddr()
		}
		t := loadgen.NewHTTPTarget(addr, o.Config.Connections, o.Ack, o.From)
		name := "http " + addr
		if o.HTTPTLS != nil {
			cfg, err := o.HTTPTLS()
			if err != nil {
				return nil, "", nil, err
			}
			if cfg != nil {
				t.WithTLS(cfg)
				name = "https " + addr
			}
		}
		return t, name, func() { t.Close() }, nil
	}
	target, opts, err := o.Dial(o.Addr())
	if err != nil {
		return nil, "", nil, err
	}
	t, err := loadgen.DialGRPCTarget(target, o.Config.Connections, uint32(o.Ack), uint32(o.From), opts...)
	if err != nil {
		return nil, "", nil, err
	}
	return t, "grpc " + o.Addr(), func() { t.Close() }, nil
}

// classifier asks the node for the ring and maps each key to its primary node.
func (o *Options) classifier(ctx context.Context) (func(string) string, error) {
	admin, err := o.Admin()
	if err != nil {
		return nil, err
	}
	resp, err := admin.Ring(ctx, &kvpb.RingRequest{})
	if err != nil {
		return nil, fmt.Errorf("--by-node needs the ring: %w", cli.RPCError(o.Addr(), err))
	}
	rs := resp.GetRing()
	var members []ring.Member // Lookup ignores states: a DOWN member is a replica all the same
	for _, m := range rs.GetMembers() {
		members = append(members, ring.Member{
			ID: m.GetId(), Addr: m.GetGrpcAddr(), Weight: int(m.GetWeight()), Tokens: m.GetTokens(),
		})
	}
	r, err := ring.New(rs.GetEpoch(), int(rs.GetReplicas()), members)
	if err != nil {
		return nil, fmt.Errorf("--by-node: ring from %s: %w", o.Addr(), err)
	}
	return func(key string) string {
		if ms := r.Lookup(ring.Token([]byte(key)), 1); len(ms) > 0 {
			return ms[0].ID
		}
		return "?"
	}, nil
}

// liveLine returns an OnInterval that prints one line per second on stderr (in place on a
// terminal).
func (o *Options) liveLine() func(loadgen.Interval) {
	if o.Quiet {
		return nil
	}
	w := o.IO.ErrOut
	return func(iv loadgen.Interval) {
		note := ""
		if iv.Warmup {
			note = "  (warmup)"
		}
		line := fmt.Sprintf("[%5.1fs] %9.1f req/s  p50 %9s  p99 %9s  errors %d  lag %s%s",
			iv.End.Seconds(), iv.Rate, fmtMs(iv.P50), fmtMs(iv.P99), iv.Errors, fmtMs(iv.SendLag), note)
		o.liveMu.Lock()
		defer o.liveMu.Unlock()
		if o.IO.ErrTTY {
			fmt.Fprintf(w, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(w, line)
		}
	}
}

// follow starts following the cluster for --events; the log is nil when events are off or
// the cluster refuses admin calls (one line on stderr says so; the run goes on). stop ends
// the following.
func (o *Options) follow(ctx context.Context) (events *loadgen.EventLog, stop func()) {
	if !o.Events {
		return nil, func() {}
	}
	events = loadgen.NewEventLog(o.eventLine())
	admin, err := o.Admin()
	if err == nil {
		stop, err = loadgen.Follow(ctx, admin, events)
	}
	if err != nil {
		fmt.Fprintf(o.IO.ErrOut, "bench: not following the cluster, no events or phases: %s\n", present.OneLine(cli.RPCError(o.Addr(), err)))
		return nil, func() {}
	}
	return events, stop
}

// eventLine prints each event on stderr as it is seen (above the live line on a terminal).
func (o *Options) eventLine() func(loadgen.Event) {
	if o.Quiet {
		return nil
	}
	return func(e loadgen.Event) {
		prefix := ""
		if o.IO.ErrTTY {
			prefix = "\r\033[K"
		}
		o.liveMu.Lock()
		defer o.liveMu.Unlock()
		fmt.Fprintf(o.IO.ErrOut, "%s[%s] %s: %s\n", prefix, e.At.Format("15:04:05.0"), e.Kind, e.Text)
	}
}

func (o *Options) endLive() {
	if !o.Quiet && o.IO.ErrTTY {
		o.liveMu.Lock()
		defer o.liveMu.Unlock()
		fmt.Fprint(o.IO.ErrOut, "\r\033[K")
	}
}

func fmtMs(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }

// ErrInvalidResult marks a run whose generator could not keep its schedule.
var ErrInvalidResult = errors.New("result invalid")

func (o *Options) run(ctx context.Context) (err error) {
	t, name, closeT, err := o.target(ctx)
	if err != nil {
		return err
	}
	defer closeT()
	cfg := o.Config
	if o.ByNode {
		if cfg.Classify, err = o.classifier(ctx); err != nil {
			return err
		}
	}
	cfg.OnInterval = o.liveLine()
	cfg.KeepIntervals = o.Hlog != ""
	if o.FindMax {
		return o.runFindMax(ctx, cfg, t, name)
	}
	if o.Record != "" {
		rec, rerr := openRecorder(o.Record)
		if rerr != nil {
			return rerr
		}
		cfg.OnAck = rec.ack
		defer func() {
			if cerr := rec.close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	events, stopFollow := o.follow(ctx)
	if events != nil || o.Chart {
		cfg.KeepIntervals = true // phases are cut from the seconds, the chart draws them
	}
	profiled := o.startProfiles(ctx, cfg)
	res, err := loadgen.Run(ctx, cfg, t)
	stopFollow()
	o.endLive()
	profiled()
	if err != nil {
		return cli.UsageErrorf("%s", err)
	}
	if events != nil {
		res.SetEvents(events.Events())
	}
	if err := o.writeFiles(res); err != nil {
		return err
	}
	if o.jsonOut() {
		if err := cli.PrintJSON(o.IO.Out, res.Report(name)); err != nil {
			return err
		}
	} else if err := loadgen.WriteSummary(o.IO.Out, res, loadgen.SummaryOptions{Target: name, Detailed: o.Latency, ByClass: o.ByNode}); err != nil {
		return err
	} else if o.Chart {
		if err := o.writeChart(res.Report(name)); err != nil {
			return err
		}
	}
	if res.Invalid {
		return fmt.Errorf("%w: %s", ErrInvalidResult, res.InvalidReason)
	}
	return nil
}

// writeChart draws the chart on a terminal, fitted to its width; elsewhere it says so in one
// line on stderr and writes the chart's series as plain lines.
func (o *Options) writeChart(rep loadgen.Report) error {
	if !o.IO.OutTTY {
		fmt.Fprintln(o.IO.ErrOut, "bench: --chart: stdout is not a terminal; the chart's series follow as plain lines")
		fmt.Fprintln(o.IO.Out)
		return loadgen.WriteSeries(o.IO.Out, rep.Seconds, rep.Events)
	}
	width := 0
	if o.IO.OutWidth != nil {
		width = o.IO.OutWidth()
	}
	if width <= 0 {
		width = 80
	}
	_, err := fmt.Fprint(o.IO.Out, "\n"+loadgen.Chart(rep.Seconds, rep.Events, width))
	return err
}

// startProfiles starts the --profile captures: when the warmup ends, every node profiles for
// the measured duration. The returned func waits for them and reports the files on stderr.
func (o *Options) startProfiles(ctx context.Context, cfg loadgen.Config) (wait func()) {
	if len(o.Profile) == 0 {
		return func() {}
	}
	prefix := "bench-" + time.Now().Format("20060102-150405")
	seconds := max(int(cfg.Duration/time.Second), 1)
	done := make(chan struct{})
	var files []string
	var err error
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			err = ctx.Err()
			return
		case <-time.After(cfg.Warmup):
		}
		var nodes []profile.Node
		if nodes, err = profile.ResolveNodes(ctx, o.Factory, "", true); err != nil {
			return
		}
		files, err = profile.Capture(ctx, o.Factory, nodes, o.Profile, seconds, o.ProfileDir, prefix)
	}()
	return func() {
		<-done
		for _, f := range files {
			fmt.Fprintf(o.IO.ErrOut, "profile: %s\n", f)
		}
		if err != nil {
			fmt.Fprintf(o.IO.ErrOut, "profile: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
}

func (o *Options) writeFiles(res *loadgen.Result) error {
	write := func(path string, fn func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		return f.Close()
	}
	if err := write(o.Hgrm, func(w io.Writer) error { return loadgen.WriteHgrm(w, res.Corrected) }); err != nil {
		return err
	}
	if err := write(o.Hist, func(w io.Writer) error { return loadgen.WriteBuckets(w, res.Corrected) }); err != nil {
		return err
	}
	return write(o.Hlog, func(w io.Writer) error { return loadgen.WriteHlog(w, res) })
}

// findMaxReport is --find-max's JSON.
type findMaxReport struct {
	SLO     string     `json:"slo"`
	MaxRate float64    `json:"max_rate"`
	Steps   []stepJSON `json:"steps"`
}

type stepJSON struct {
	Rate   float64        `json:"rate"`
	Phase  string         `json:"phase"`
	Pass   bool           `json:"pass"`
	Why    string         `json:"why,omitempty"`
	Result loadgen.Report `json:"result"`
}

func (o *Options) runFindMax(ctx context.Context, cfg loadgen.Config, t loadgen.Target, name string) error {
	fc := o.FindMaxC
	json := o.jsonOut()
	if !json {
		fmt.Fprintf(o.IO.Out, "find-max @ %s: %s, %d connections, %s steps after %s warmup, slo %s\n",
			name, cfg.Workload, cfg.Connections, fc.Step, cfg.Warmup, o.slo)
	}
	fc.OnStep = func(s loadgen.Step) {
		o.endLive()
		if !json {
			fmt.Fprintln(o.IO.Out, s)
		}
	}
	best, steps, err := loadgen.FindMax(ctx, cfg, t, o.slo, fc)
	o.endLive()
	if json {
		rep := findMaxReport{SLO: o.slo.String(), MaxRate: best}
		for _, s := range steps {
			rep.Steps = append(rep.Steps, stepJSON{Rate: s.Rate, Phase: s.Phase, Pass: s.Pass, Why: s.Why, Result: s.Result.Report(name)})
		}
		if perr := cli.PrintJSON(o.IO.Out, rep); perr != nil {
			return perr
		}
	}
	if errors.Is(err, loadgen.ErrInvalidConfig) {
		return cli.UsageErrorf("%s", err)
	}
	if err != nil {
		return err
	}
	if !json {
		fmt.Fprintf(o.IO.Out, "max rate holding %s: %.0f req/s (%d steps)\n", o.slo, best, len(steps))
	}
	return nil
}
