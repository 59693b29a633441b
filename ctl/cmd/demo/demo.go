// Package demo holds `kvctl demo`: a cluster inside the kvctl process, opened in the console.
package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/loadgen"
	"ringkv/node"
	"ringkv/proto/kvpb"
	console "ringkv/tui"
)

// Options are demo's flags.
type Options struct {
	IO       *cli.IOStreams
	Headless bool
	Nodes    int
	Replicas int
	// Spares is the number of empty nodes started besides the founders, awaiting admission
	// (the console's add offers them).
	Spares int
	// Keys is the size of the keyspace filled before the console opens (0 = no fill, no load).
	Keys int
	// Rate of the zipf-skewed background load in requests per second (0 = none).
	Rate int
	// ProfileDir is where the console's CPU profiles are written.
	ProfileDir string
	// ChangeRate is the nodes' streaming throttle of a ring change per receiver, bytes per
	// second (0 = the nodes' default): a low one makes an add slow enough to pause.
	ChangeRate uint64
	changeRate string
	// Ready, when set, is called with the running cluster (tests use it to stop the demo).
	Ready func(*node.LocalCluster)
}

// Defaults of the demo's keyspace and load.
const (
	DefaultKeys = 20_000
	DefaultRate = 200
	// DefaultSpares empty nodes await admission, so that an add can be tried at once.
	DefaultSpares = 2
	keyPrefix     = "demo:"
	// demoRaftTimeout is the metadata group's heartbeat and election timeout (raft's default:
	// 1 s); the leader lease is all of it (node: a configured heartbeat timeout leases it).
	demoRaftTimeout = 3 * time.Second
)

// NewCmdDemo returns `kvctl demo`. runF replaces the run step in tests.
func NewCmdDemo(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Nodes: 3, Replicas: 3, Spares: DefaultSpares, Keys: DefaultKeys, Rate: DefaultRate, ProfileDir: "."}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Try ringkv: a 3-node cluster in this process with a light load, opened in the console",
		Long: `demo starts founders n1..n3 in this process on free 127.0.0.1 ports, with badger in a
temporary directory that is removed on exit, and --spares empty nodes (n4, n5) that await
admission. It writes --keys keys (for at most 3 seconds; it stops early when writes keep
failing), runs a light zipf-skewed background load (--rate requests per second, so one vnode
runs hot) and opens the console on the cluster. When the fill failed or a node is not up,
the console says so in red under the hint. q quits: the load stops, the nodes stop and the
data is removed.

In the demo's console, a (add) plans the add of the first spare: y starts it, and its data
streams in on the changes view (3); P pauses and resumes it (--change-rate slows the move
down enough to try). x stops the selected node's process and X starts it again, so a node
going DOWN, the hints kept for it, readiness and repair can be watched.

--headless (or a stdout that is not a terminal) prints the nodes' addresses instead and
serves until Ctrl-C.`,
		Example: `  kvctl demo
  kvctl demo --rate 1000 --keys 100000
  kvctl demo --headless`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case o.Nodes < 1 || o.Nodes > 16:
				return cli.UsageErrorf("--nodes %d: want 1..16", o.Nodes)
			case o.Spares < 0 || o.Nodes+o.Spares > 16:
				return cli.UsageErrorf("--spares %d: want 0..%d", o.Spares, max(0, 16-o.Nodes))
			case o.Replicas < 1:
				return cli.UsageErrorf("--replicas %d: want at least 1", o.Replicas)
			case o.Keys < 0:
				return cli.UsageErrorf("--keys %d: want >= 0", o.Keys)
			case o.Rate < 0:
				return cli.UsageErrorf("--rate %d: want >= 0", o.Rate)
			}
			if o.changeRate != "" {
				r, err := cli.ParseRate(o.changeRate)
				if err != nil || r == 0 {
					return cli.UsageErrorf("--change-rate %q: want MB/s above 0, e.g. 0.2 or 200KB/s", o.changeRate)
				}
				o.ChangeRate = r
			}
			if runF != nil {
				return runF(o)
			}
			return Run(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Headless, "headless", false, "serve without opening the console")
	cmd.Flags().IntVar(&o.Nodes, "nodes", o.Nodes, "number of nodes")
	cmd.Flags().IntVar(&o.Spares, "spares", o.Spares, "empty nodes started besides the founders, awaiting admission (kvctl ring add, the console's a)")
	cmd.Flags().IntVar(&o.Replicas, "replicas", o.Replicas, "replication factor")
	cmd.Flags().IntVar(&o.Keys, "keys", o.Keys, "keys written before the console opens (console only)")
	cmd.Flags().IntVar(&o.Rate, "rate", o.Rate, "background load in requests per second, zipf-skewed (console only)")
	cmd.Flags().StringVar(&o.ProfileDir, "profile-dir", o.ProfileDir, "directory the console's CPU profiles are written to")
	cmd.Flags().StringVar(&o.changeRate, "change-rate", "", "streaming throttle of a ring change per receiving node in MB/s, e.g. 0.2 (unset: the nodes' default); a low one lets an add be paused (P) and watched")
	return cmd
}

// Run starts the cluster and either opens the console on it until the user quits, or (headless,
// or without a terminal) prints how to reach it and serves until ctx ends. Either way the
// nodes stop and the data directory is removed before Run returns.
func Run(ctx context.Context, o *Options) (err error) {
	withConsole := !o.Headless
	if withConsole && (!o.IO.OutTTY || !o.IO.InTTY) {
		fmt.Fprintln(o.IO.ErrOut, "kvctl demo: not a terminal; serving headless (as --headless)")
		withConsole = false
	}
	dir, err := os.MkdirTemp("", "ringkv-demo-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	if !withConsole {
		// Said once the nodes are stopped and the data removed (the defers below run first):
		// a reader of the log that has gone away cannot keep the data on disk.
		defer func() {
			if err == nil {
				fmt.Fprintf(o.IO.ErrOut, "kvctl demo: stopped, %s removed\n", dir)
			}
		}()
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	// While the console owns the terminal, log lines are held and printed after it closes.
	logs := &logSink{out: o.IO.ErrOut}
	// The console shows the cluster's state; its warnings (no secret on loopback, peers
	// unreachable while stopping) would only be noise in the demo.
	level := slog.LevelWarn
	if withConsole {
		level = slog.LevelError
	}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level}))
	base := node.DefaultConfig()
	base.Replicas = o.Replicas
	// The nodes share this process and whatever CPU the machine leaves it; with raft's
	// defaults (1 s heartbeat, a 500 ms leader lease) the leader stepped down at each stall
	// of half a second, and under two spin loops on two cores (load 9-13) the group went the
	// console's 9 s without one: a pause was refused "not the raft leader". A demo has no
	// failover to hurry; an election after a stopped leader takes 3-6 s.
	base.RaftHeartbeatTimeout, base.RaftElectionTimeout = demoRaftTimeout, demoRaftTimeout
	if o.ChangeRate > 0 {
		base.ChangeRate = o.ChangeRate
	}
	start := time.Now()
	c, err := node.StartLocalCluster(ctx, o.Nodes, base, dir, logger)
	if err != nil {
		return fmt.Errorf("start demo cluster: %w", err)
	}
	nc := &nodes{c: c}
	defer func() { err = errors.Join(err, nc.Close()) }()
	for i := range o.Spares {
		if _, err := c.StartEmpty(fmt.Sprintf("n%d", o.Nodes+i+1)); err != nil {
			return fmt.Errorf("start spare node: %w", err)
		}
	}
	if !withConsole {
		return headless(ctx, o, c, dir)
	}
	fmt.Fprintf(o.IO.ErrOut, "kvctl demo: %d nodes up in %s (%d spare), data in %s (removed on exit)\n",
		c.Len(), present.Elapsed(time.Since(start)), o.Spares, dir)
	return runConsole(ctx, o, c, nc, logs)
}

func headless(ctx context.Context, o *Options, c *node.LocalCluster, dir string) error {
	t := cli.NewTable(o.IO, "NODE", "ROLE", "HTTP", "GRPC", "ADMIN")
	for i := range c.Len() {
		a := c.Node(i).Addrs()
		role := "founder"
		if i >= o.Nodes {
			role = "spare, awaiting admission"
		}
		t.Row(c.Node(i).ID(), role, "http://"+a.HTTP, a.GRPC, "http://"+a.Admin)
	}
	fmt.Fprintf(o.IO.Out, "ringkv demo: %d nodes and %d spare, replicas %d, data in %s (removed on exit)\n", o.Nodes, o.Spares, o.Replicas, dir)
	if err := t.Render(); err != nil {
		return err
	}
	a := c.Node(0).Addrs()
	fmt.Fprintf(o.IO.Out, `
Try it:
  curl -X PUT -d hello 'http://%[1]s/v0/entity?id=greeting'
  curl 'http://%[1]s/v0/entity?id=greeting'
  kvctl --addr %[2]s status
  kvctl --addr %[2]s get greeting
`, a.HTTP, a.GRPC)
	if o.Spares > 0 {
		sp := c.Node(o.Nodes)
		fmt.Fprintf(o.IO.Out, "  kvctl --addr %s ring add %s=%s --yes    # a spare joins; its data streams in\n", a.GRPC, sp.ID(), sp.Addrs().GRPC)
	}
	fmt.Fprintln(o.IO.Out, "Ctrl-C stops the cluster.")
	if o.Ready != nil {
		o.Ready(c)
	}
	<-ctx.Done()
	// Ctrl-C on "kvctl demo --headless | tee log" stops tee too: from now on a write to the
	// pipe must fail with EPIPE, not kill kvctl by SIGPIPE before it has removed the data.
	signal.Ignore(syscall.SIGPIPE)
	return nil
}

// runConsole fills the keyspace, starts the background load and runs the console until the
// user quits; the load and the bench are stopped before it returns.
func runConsole(ctx context.Context, o *Options, c *node.LocalCluster, nc *nodes, logs *logSink) error {
	var addrs []string
	for i := range o.Nodes {
		addrs = append(addrs, c.Node(i).Addrs().GRPC)
	}
	var spares []console.Spare
	for i := o.Nodes; i < c.Len(); i++ {
		spares = append(spares, console.Spare{ID: c.Node(i).ID(), Addr: c.Node(i).Addrs().GRPC})
	}
	f := &cli.Factory{IO: o.IO, Addr: addrs[0], Output: "table"}
	defer f.Close()
	var clients []kvpb.KVClient
	for _, a := range addrs {
		kv, err := f.KV(a)
		if err != nil {
			return err
		}
		clients = append(clients, kv)
	}
	target := loadgen.NewGRPCTarget(clients, 0, 0)

	keys := o.Keys
	var warnings []string
	if keys > 0 {
		fr, err := fill(ctx, o, clients)
		if err != nil {
			return err
		}
		keys = fr.Keys
		if fr.Failed() {
			warnings = append(warnings, "fill: "+fr.errorsByKind()+" ("+fr.FirstError()+")")
		}
	}
	admin, err := f.Admin(addrs[0])
	if err != nil {
		return err
	}
	if w := health(ctx, admin); w != "" {
		warnings = append(warnings, w)
	}
	warning := ""
	if len(warnings) > 0 {
		warning = strings.Join(warnings, " · ") + " — see overview (1)"
		fmt.Fprintln(o.IO.ErrOut, "kvctl demo: warning: "+warning)
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		if o.Rate > 0 && keys > 0 {
			_, _ = loadgen.Run(loadCtx, loadConfig(keys, o.Rate, loadgen.KeyDist{Kind: loadgen.DistZipf, S: 1.1}, 8), target)
		}
	}()
	defer func() {
		stopLoad()
		<-loadDone
	}()

	live := &loadgen.Live{}
	bench := func(ctx context.Context, rate int) (string, error) {
		admin, err := f.Admin("")
		if err != nil {
			admin = nil // no events: the chart still draws
		}
		res, err := live.Run(ctx, loadConfig(max(keys, 1), rate, loadgen.KeyDist{Kind: loadgen.DistUniform}, 16), target, admin)
		if err != nil {
			return "", err
		}
		return res.Line(), nil
	}
	acts := console.NewActions(f, o.ProfileDir, bench)
	acts.Chart = live.Chart
	defer acts.Close()
	src := console.NewAdminSource(console.AdminConfig{Seeds: addrs, Dial: f.Admin})

	if o.Ready != nil {
		o.Ready(c)
	}
	logs.hold()
	defer logs.release()
	return console.Run(ctx, console.Options{
		Source:  src,
		Actions: acts,
		Hint:    hint(keys, o.Rate),
		Warning: warning,
		Spares:  spares,
		Nodes:   nc,
		Start:   console.ScreenHeatmap,
	}, console.RunOptions{In: o.IO.In, Out: o.IO.Out})
}

// health asks the cluster for its status and names what is wrong: nodes that do not answer
// or are not UP. "" = all well.
func health(ctx context.Context, c kvpb.AdminClient) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := c.Status(ctx, &kvpb.StatusRequest{})
	if err != nil {
		return "cluster status: " + status.Convert(err).Message()
	}
	var bad []string
	for _, n := range st.GetNodes() {
		switch {
		case n.GetError() != "":
			bad = append(bad, n.GetId()+" not answering")
		case n.GetState() != kvpb.NodeState_NODE_STATE_UP:
			bad = append(bad, n.GetId()+" "+present.NodeState(n.GetState()))
		}
	}
	return strings.Join(bad, ", ")
}

// hint is the console's one-line explanation of the demo (it fits 80 columns). It names
// what does not change while the console runs, the load: the live counts of nodes and keys
// are the console's (its title and overview follow the ring after a drain or an add).
func hint(keys, rate int) string {
	if rate == 0 || keys == 0 {
		return "demo · nodes in this process, no load · ? keys · q quit"
	}
	return fmt.Sprintf("demo · zipf load %d req/s over %s keys: hot vnode ▲ · ? keys · q quit",
		rate, compact(keys))
}

// compact writes 20000 as 20k, 16980 as 17k and 2345 as 2.3k.
func compact(n int) string {
	switch {
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	case n >= 10_000:
		return fmt.Sprintf("%.0fk", float64(n)/1000)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprint(n)
}

// loadConfig is an endless open-model load of GETs and 10% PUTs on the demo's keyspace.
func loadConfig(keys, rate int, dist loadgen.KeyDist, conns int) loadgen.Config {
	cfg := loadgen.DefaultConfig()
	cfg.Rate = float64(rate)
	cfg.Warmup = 0
	cfg.Duration = 365 * 24 * time.Hour // until cancelled
	cfg.Connections = conns
	cfg.Workload = loadgen.Mix{Get: 9, Put: 1}
	cfg.Keys = int64(keys)
	cfg.KeyDist = dist
	cfg.KeyPrefix = keyPrefix
	cfg.ValueSize = loadgen.Size{Min: 100, Max: 400}
	cfg.MaxLag = time.Hour // a demo on a busy laptop is not a measurement
	return cfg
}

// The fill's budgets: it stops after fillBudget (so that the demo opens in seconds on a slow
// machine too) or once more than fillMaxErrors requests failed and they are over
// fillMaxErrorShare of the answers (a cluster that fails its writes is not filled harder).
// fillConns connections are enough to saturate three in-process nodes; more only queue up and
// time out on a loaded machine.
const (
	fillBudget        = 3 * time.Second
	fillMaxErrors     = 50
	fillMaxErrorShare = 0.05
	fillConns         = 16
)

// fillResult is what the fill did.
type fillResult struct {
	// Keys is the keyspace filled: the first Keys keys in order, failed writes among them.
	Keys    int
	Wanted  int
	Elapsed time.Duration
	Errors  map[loadgen.Kind]int64
	// TimeBudget: stopped at fillBudget; ErrorBudget: stopped because too many writes failed.
	TimeBudget, ErrorBudget bool
	// First is the first error message of each kind.
	First map[loadgen.Kind]string
}

// FirstError is the first message of the most frequent error kind, "" without errors.
func (r fillResult) FirstError() string {
	var top loadgen.Kind
	for _, k := range loadgen.ErrorKinds() {
		if r.Errors[k] > r.Errors[top] {
			top = k
		}
	}
	if r.Errors[top] == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %s", top, r.First[top])
}

// ErrorCount is the number of failed writes.
func (r fillResult) ErrorCount() int64 {
	var n int64
	for _, c := range r.Errors {
		n += c
	}
	return n
}

// errorsByKind writes "0 errors" or "1234 errors: timeout 1200, unavailable 34", kinds in
// report order.
func (r fillResult) errorsByKind() string {
	n := r.ErrorCount()
	if n == 0 {
		return "0 errors"
	}
	var parts []string
	for _, k := range loadgen.ErrorKinds() {
		if c := r.Errors[k]; c > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, c))
		}
	}
	return fmt.Sprintf("%d errors: %s", n, strings.Join(parts, ", "))
}

// Line is the fill's one-line summary.
func (r fillResult) Line() string {
	note := ""
	switch {
	case r.ErrorBudget:
		note = "; stopped: too many errors"
	case r.TimeBudget:
		note = fmt.Sprintf("; stopped at the %s budget", fillBudget)
	}
	written := r.Keys - int(r.ErrorCount())
	rate := 0.0
	if r.Elapsed > 0 {
		rate = float64(written) / r.Elapsed.Seconds()
	}
	return fmt.Sprintf("filled %d of %d keys in %s (%.0f keys/s, %s%s)",
		written, r.Wanted, present.Elapsed(r.Elapsed), rate, r.errorsByKind(), note)
}

// Failed tells whether the fill's errors say the cluster is in trouble.
func (r fillResult) Failed() bool {
	n := r.ErrorCount()
	return r.ErrorBudget || (n > 0 && float64(n) > fillMaxErrorShare*float64(r.Keys))
}

// fillTarget writes the fill's keys through the clients with ack=1, counts the answers, keeps
// the first error message of each kind (to say why the fill failed) and calls stop once the
// errors are over budget. Safe for concurrent use, as loadgen calls it.
type fillTarget struct {
	clients    []kvpb.KVClient
	stop       func()
	done, errs atomic.Int64
	overBudget atomic.Bool

	mu    sync.Mutex
	first map[loadgen.Kind]string
}

var _ loadgen.Target = (*fillTarget)(nil)

// Put implements loadgen.Target.
func (f *fillTarget) Put(ctx context.Context, conn int, key string, value []byte) loadgen.Kind {
	// ack=1: the fill waits for one replica, the other two catch up in the background.
	_, err := f.clients[conn%len(f.clients)].Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: value, Ack: 1})
	k := loadgen.GRPCKind(ctx, err)
	d := f.done.Add(1)
	if !k.IsError() {
		return k
	}
	f.mu.Lock()
	if _, ok := f.first[k]; !ok {
		f.first[k] = status.Convert(err).Message()
	}
	f.mu.Unlock()
	if e := f.errs.Add(1); e > fillMaxErrors && float64(e) > fillMaxErrorShare*float64(d) && !f.overBudget.Swap(true) {
		f.stop()
	}
	return k
}

// Get implements loadgen.Target; the fill only writes.
func (f *fillTarget) Get(context.Context, int, string) loadgen.Kind { return loadgen.KindOK }

// Delete implements loadgen.Target; the fill only writes.
func (f *fillTarget) Delete(context.Context, int, string) loadgen.Kind { return loadgen.KindOK }

// fill writes the keyspace's keys in order, as fast as the cluster takes them, within its
// budgets, with progress on stderr. The keys written are the keyspace the load then uses.
func fill(ctx context.Context, o *Options, clients []kvpb.KVClient) (fillResult, error) {
	cfg := loadConfig(o.Keys, 0, loadgen.KeyDist{Kind: loadgen.DistSequential}, fillConns)
	cfg.Workload = loadgen.Mix{Put: 1}
	cfg.Requests = int64(o.Keys)
	// The run ends itself at the budget and lets the writes in flight finish; cancelling it
	// instead would count them as failed.
	cfg.Duration = fillBudget
	var done, errs int64
	progress := func(line string) {
		if o.IO.ErrTTY {
			fmt.Fprintf(o.IO.ErrOut, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(o.IO.ErrOut, line)
		}
	}
	progress(fmt.Sprintf("kvctl demo: filling %d keys…", o.Keys))
	cfg.OnInterval = func(iv loadgen.Interval) {
		done += iv.Requests
		errs += iv.Errors
		progress(fmt.Sprintf("kvctl demo: filled %d/%d keys (%.0f%%), %.0f keys/s, %d errors",
			done, o.Keys, 100*float64(done)/float64(o.Keys), iv.Rate, errs))
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ft := &fillTarget{clients: clients, stop: cancel, first: map[loadgen.Kind]string{}}
	start := time.Now()
	res, err := loadgen.Run(fctx, cfg, ft)
	if err != nil {
		return fillResult{}, fmt.Errorf("fill: %w", err)
	}
	if ctx.Err() != nil {
		return fillResult{}, fmt.Errorf("fill interrupted after %d of %d keys: %w", res.Requests, o.Keys, ctx.Err())
	}
	if o.IO.ErrTTY {
		fmt.Fprint(o.IO.ErrOut, "\r\033[K")
	}
	r := fillResult{
		Keys:        int(res.Requests),
		Wanted:      o.Keys,
		Elapsed:     time.Since(start),
		Errors:      map[loadgen.Kind]int64{},
		ErrorBudget: ft.overBudget.Load(),
		First:       ft.first,
	}
	r.TimeBudget = r.Keys < o.Keys && !r.ErrorBudget
	for k, c := range res.Errors {
		if k.IsError() && c > 0 {
			r.Errors[k] = c
		}
	}
	fmt.Fprintln(o.IO.ErrOut, "kvctl demo: "+r.Line())
	if r.ErrorCount() > 0 {
		fmt.Fprintln(o.IO.ErrOut, "kvctl demo: first error: "+r.FirstError())
	}
	return r, nil
}
