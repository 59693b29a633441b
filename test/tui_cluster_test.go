package test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/internal/eventually"
	"ringkv/internal/leaktest"
	"ringkv/node"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
	"ringkv/tui"
)

// tuiCluster is a 3-node in-process cluster with an AdminSource running on it.
type tuiCluster struct {
	c     *node.LocalCluster
	src   *tui.AdminSource
	admin func(addr string) (kvpb.AdminClient, error)
}

// startTUICluster starts the cluster (real badger in t.TempDir, real gRPC on loopback) and an
// AdminSource over all three nodes. Cleanup stops the source, closes the connections and
// the nodes, then checks for leaked goroutines.
func startTUICluster(t *testing.T, leakOpts ...goleak.Option) *tuiCluster {
	t.Helper()
	return startTUIClusterOf(t, node.DefaultConfig(), leakOpts...)
}

// startTUIClusterOf is startTUICluster with the nodes' base config.
func startTUIClusterOf(t *testing.T, base node.Config, leakOpts ...goleak.Option) *tuiCluster {
	t.Helper()
	leakOpts = append(append(leakOpts, goleak.IgnoreCurrent()), leaktest.NodeLibraries...)
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := node.StartLocalCluster(context.Background(), 3, base, t.TempDir(), logger)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})

	var mu sync.Mutex
	conns := map[string]*grpc.ClientConn{}
	t.Cleanup(func() {
		for _, cc := range conns {
			cc.Close()
		}
	})
	dial := func(addr string) (kvpb.AdminClient, error) {
		mu.Lock()
		defer mu.Unlock()
		cc, ok := conns[addr]
		if !ok {
			var err error
			if cc, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
				return nil, err
			}
			conns[addr] = cc
		}
		return kvpb.NewAdminClient(cc), nil
	}
	var seeds []string
	for i := range c.Len() {
		seeds = append(seeds, c.Node(i).Addrs().GRPC)
	}
	src := tui.NewAdminSource(tui.AdminConfig{Seeds: seeds, Dial: dial})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = src.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &tuiCluster{c: c, src: src, admin: dial}
}

// TestTUIAdminSourceNodeDown runs AdminSource against a real 3-node cluster: every node's
// snapshots (with vnodes) arrive; when n2 stops, the console model shows it DOWN within 2s
// of the stop and keeps taking the other nodes' samples.
func TestTUIAdminSourceNodeDown(t *testing.T) {
	tc := startTUICluster(t)
	var model tea.Model = tui.New(tui.Options{Source: tc.src})
	step := func(msg tea.Msg) { model, _ = model.Update(msg) }
	render := func() string { return model.(tui.Model).Render() }

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	st, err := tc.src.Status(ctx)
	step(tui.StatusMsg{Resp: st, Err: err})
	rg, err := tc.src.Ring(ctx)
	step(tui.RingMsg{Resp: rg, Err: err})
	cancel()
	if err != nil {
		t.Fatalf("ring: %v", err)
	}

	tick := time.NewTicker(tui.DefaultTick)
	defer tick.Stop()
	// pump feeds samples and ticks to the model until cond holds or d passes. last is when
	// the model had taken each node's last sample. A tick taken more than DownAfter after
	// n2's must show it DOWN: the model's clock read at least that much between the two,
	// however late the machine delivered either.
	seen := map[string]int{}
	last := map[string]time.Time{}
	pump := func(d time.Duration, cond func() bool) bool {
		deadline := time.After(d)
		for !cond() {
			select {
			case s, ok := <-tc.src.Stats():
				if !ok {
					t.Fatal("stats stream closed")
				}
				if len(s.GetVnodes()) == 0 {
					t.Errorf("got a %s sample without vnodes, want per-vnode stats", s.GetId())
				}
				seen[s.GetId()]++
				step(tui.StatsMsg{Stats: s})
				last[s.GetId()] = time.Now()
			case <-tick.C:
				at := time.Now()
				step(tui.TickMsg{})
				if l, ok := last["n2"]; ok && at.Sub(l) > tui.DefaultDownAfter && !strings.Contains(render(), "node n2 is DOWN") {
					t.Fatalf("n2 not DOWN at a tick %s after its last sample, want DOWN past DownAfter (%s):\n%s",
						at.Sub(l).Round(time.Millisecond), tui.DefaultDownAfter, render())
				}
			case <-deadline:
				return false
			}
		}
		return true
	}
	if !pump(10*time.Second, func() bool { return seen["n1"] > 0 && seen["n2"] > 0 && seen["n3"] > 0 }) {
		t.Fatalf("got samples from %v within 10s, want n1, n2 and n3", seen)
	}
	if !pump(3*time.Second, func() bool { return !strings.Contains(render(), "DOWN") && strings.Contains(render(), "n3") }) {
		t.Fatalf("got a node DOWN with all nodes running:\n%s", render())
	}

	// A stopping node drains for a while and keeps streaming; "stops answering" is its last
	// sample, and the console shows it DOWN at the first tick past DownAfter (pump checks:
	// on a quiet machine within 2 s of the sample; under load the ticks come late).
	stopped := time.Now()
	stopErr := make(chan error, 1)
	go func() { stopErr <- tc.c.Stop(1) }()
	if !pump(60*time.Second, func() bool { return strings.Contains(render(), "node n2 is DOWN") }) {
		t.Fatalf("n2 not DOWN %s after it was stopped, %s after its last sample:\n%s",
			time.Since(stopped).Round(time.Millisecond), time.Since(last["n2"]).Round(time.Millisecond), render())
	}
	down := time.Now()
	t.Logf("n2 DOWN %s after its last sample, %s after the stop began",
		down.Sub(last["n2"]).Round(time.Millisecond), down.Sub(stopped).Round(time.Millisecond))
	if err := <-stopErr; err != nil {
		t.Fatalf("stop n2: %v", err)
	}

	// The console keeps working: n1 and n3 keep arriving and stay UP.
	n1, n3 := seen["n1"], seen["n3"]
	// A deadline, not a rate: under two spin loops (load 12-17) n3 sent 2 samples in 5 s.
	if !pump(30*time.Second, func() bool { return seen["n1"] >= n1+3 && seen["n3"] >= n3+3 }) {
		t.Fatalf("after n2 stopped got %d/%d more samples of n1/n3 within 30s, want 3 each", seen["n1"]-n1, seen["n3"]-n3)
	}
	out := render()
	for _, bad := range []string{"node n1 is DOWN", "node n3 is DOWN"} {
		if strings.Contains(out, bad) {
			t.Errorf("got %q with the node running:\n%s", bad, out)
		}
	}
	step(tea.KeyPressMsg{Code: '2', Text: "2"})
	if out := render(); !strings.Contains(out, "log scale") || !strings.Contains(out, "n2") {
		t.Errorf("heatmap after n2 stopped lacks its legend or n2's row:\n%s", out)
	}
}

// TestTUINodeKilledDuringSession runs the whole console (teatest, a real program loop) on a
// real cluster, stops n3 while it runs and checks that n3 turns DOWN, the console keeps
// answering keys and a drain of the dead node shows the cluster's answer in a dialog.
func TestTUINodeKilledDuringSession(t *testing.T) {
	tc := startTUICluster(t,
		// teatest waits for a SIGINT for the rest of the process.
		goleak.IgnoreTopFunction("github.com/charmbracelet/x/exp/teatest/v2.NewTestModel.func2"),
		// bubbletea's pending tea.Tick commands outlive the program by at most one period.
		goleak.IgnoreTopFunction("charm.land/bubbletea/v2.Tick.func1"))
	acts := &tui.AdminActions{
		Admin: func() (kvpb.AdminClient, error) { return tc.admin(tc.c.Config(0).GRPCAddr) },
	}
	t.Cleanup(func() { acts.Close() })
	// The filter sees every message with the model about to handle it: keep its screen.
	var screen atomic.Value
	screen.Store("")
	filter := func(m tea.Model, msg tea.Msg) tea.Msg {
		if mm, ok := m.(tui.Model); ok {
			screen.Store(ansi.Strip(mm.Render()))
		}
		return msg
	}
	m := tui.New(tui.Options{Source: tc.src, Actions: acts})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(100, 30),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.Ascii), tea.WithFilter(filter)))
	t.Cleanup(func() { _ = tm.Quit() }) // on a failure: stop the program before the leak check
	waitScreen := func(what string, d time.Duration, cond func(s string) bool) {
		t.Helper()
		eventually.Succeeds(t, d, func() error {
			if s := screen.Load().(string); !cond(s) {
				return fmt.Errorf("no %s; screen:\n%s", what, s)
			}
			return nil
		})
	}
	waitScreen("three UP nodes", 10*time.Second, func(s string) bool {
		return strings.Count(s, " UP ") == 3
	})
	if err := tc.c.Stop(2); err != nil {
		t.Fatalf("stop n3: %v", err)
	}
	waitScreen("DOWN alert for n3", 5*time.Second, func(s string) bool { return strings.Contains(s, "node n3 is DOWN") })

	tm.Type("2")
	waitScreen("heatmap", 5*time.Second, func(s string) bool { return strings.Contains(s, "log scale") })
	tm.Type("1")
	tm.Type("jj") // select n3, the dead node
	tm.Type("d")
	waitScreen("drain dialog", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "remove n3") && (strings.Contains(s, "press any key") || strings.Contains(s, "y/enter confirm"))
	})
	tm.Type("n")
	tm.Type("x") // closes a result dialog; a no-op key otherwise
	tm.Type("q")
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second))
	if _, ok := fm.(tui.Model); !ok {
		t.Fatalf("got final model %T, want tui.Model", fm)
	}
}

// TestTUIHotRangeInOwnersRow writes one key over and over on a real cluster: every replica
// counts the writes in its own per-vnode stats, and the console's heatmap shows the key's
// range hot once — in the row of the node that owns the range, first in the hottest list
// with the owner first among its replicas.
func TestTUIHotRangeInOwnersRow(t *testing.T) {
	tc := startTUICluster(t)
	var model tea.Model = tui.New(tui.Options{Source: tc.src, Start: tui.ScreenHeatmap})
	step := func(msg tea.Msg) { model, _ = model.Update(msg) }
	step(tea.WindowSizeMsg{Width: 160, Height: 48})
	render := func() string { return ansi.Strip(model.(tui.Model).Render()) }

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	rg, err := tc.src.Ring(ctx)
	cancel()
	if err != nil {
		t.Fatalf("ring: %v", err)
	}
	step(tui.RingMsg{Resp: rg})

	// The key's range: the first token at or after the key's token (wrapping), its owner, and
	// the token before it.
	key := []byte("hot-key")
	kt := ring.Token(key)
	type tok struct {
		t  uint64
		id string
	}
	var toks []tok
	for _, m := range rg.GetRing().GetMembers() {
		for _, x := range m.GetTokens() {
			toks = append(toks, tok{x, m.GetId()})
		}
	}
	sort.Slice(toks, func(i, j int) bool { return toks[i].t < toks[j].t })
	i := sort.Search(len(toks), func(i int) bool { return toks[i].t >= kt }) % len(toks)
	end, owner := toks[i], toks[i].id
	start := toks[(i+len(toks)-1)%len(toks)].t
	wantRange := fmt.Sprintf("%08x…%08x", start>>32, end.t>>32)

	kv, err := grpc.NewClient(tc.c.Node(0).Addrs().GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	wctx, stopWrites := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopWrites()
	wg.Go(func() {
		c := kvpb.NewKVClient(kv)
		for wctx.Err() == nil {
			_, _ = c.Put(wctx, &kvpb.PutRequest{Key: key, Value: []byte("v")})
		}
	})

	// hottest returns the first line of the hottest list.
	hottest := func(s string) string {
		lines := strings.Split(s, "\n")
		for j, l := range lines {
			if strings.HasPrefix(l, "hottest vnodes") && j+2 < len(lines) {
				return lines[j+2]
			}
		}
		return ""
	}
	deadline := time.After(15 * time.Second)
	for !strings.Contains(hottest(render()), wantRange) {
		select {
		case s, ok := <-tc.src.Stats():
			if !ok {
				t.Fatal("stats stream closed")
			}
			step(tui.StatsMsg{Stats: s})
		case <-deadline:
			t.Fatalf("range %s of %s (key token %016x) not the hottest within 15s:\n%s", wantRange, owner, kt, render())
		}
	}
	s := render()
	f := strings.Fields(hottest(s))
	if len(f) < 3 || f[1] != owner || !strings.HasPrefix(f[2], owner+",") || strings.Count(f[2], ",") != 2 {
		t.Errorf("hottest %q: want owner %s, then 3 replicas with %s first", hottest(s), owner, owner)
	}
	var marked []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "▲") && !strings.Contains(l, "hottest") {
			marked = append(marked, l)
		}
	}
	if len(marked) != 1 || !strings.HasPrefix(marked[0], owner+" ") {
		t.Errorf("got the hot mark on %d lines %q, want one: %s's row", len(marked), marked, owner)
	}
}
