package tui

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"ringkv/ctl/oncall"
	"ringkv/proto/kvpb"
)

// fakeOnCall is the fake cluster with the on-call view's answers: live hot keys with one key,
// user:42, at 90% of n2's hot vnode (the alert's), two keys in n1's first vnode, and an hour
// of heat history at 10 s steps with a hot row, five minutes no node saw, and events.
type fakeOnCall struct{ *FakeSource }

var _ OnCall = fakeOnCall{}

// fakeStep is the token width of one fake vnode (see NewFakeSource).
var fakeStep = math.MaxUint64 / uint64(FakeNodes*FakeVnodes)

// HotKeys implements OnCall: each node coordinated a third of the keys, over the last 6 s.
func (fakeOnCall) HotKeys(_ context.Context, req *kvpb.HotKeysRequest) ([]*kvpb.HotKeysResponse, error) {
	hot := 28*fakeStep + fakeStep/2 // in n2's 10th vnode, (28, 29] steps
	var out []*kvpb.HotKeysResponse
	for _, id := range []string{"n1", "n2", "n3"} {
		out = append(out, &kvpb.HotKeysResponse{
			Node: id, StartUnixNanos: fixedNow.Add(-6 * time.Second).UnixNano(), EndUnixNanos: fixedNow.UnixNano(),
			Slices: 1, Ops: 3000, Reads: 2400, Writes: 600, Bytes: 3000 * 100, SliceSeconds: 10, MaxWindowSeconds: 60,
			Keys: []*kvpb.HotKey{
				{Key: []byte("user:42"), KeyLen: 7, Token: hot, Count: 600, Reads: 500, Writes: 100, Bytes: 60000},
				{Key: []byte("cart:7"), KeyLen: 6, Token: fakeStep / 2, Count: 40, Error: 2, Reads: 30, Writes: 10, Bytes: 4000},
				{Key: []byte("session:a1b2"), KeyLen: 12, Token: fakeStep / 3, Count: 12, Error: 2, Reads: 12, Bytes: 1200},
			},
			Floor:  2,
			Vnodes: []*kvpb.VnodeOps{{Token: fakeStep, Ops: 80}, {Token: 29 * fakeStep, Ops: 667}},
		})
	}
	return out, nil
}

// Heat implements OnCall: the hour before fixedNow.
func (fakeOnCall) Heat(_ context.Context, req *kvpb.HeatRequest) ([]*kvpb.HeatResponse, error) {
	step := 10 * time.Second
	first := fixedNow.Add(-time.Hour).Truncate(step)
	var out []*kvpb.HeatResponse
	for n, id := range []string{"n1", "n2", "n3"} {
		r := &kvpb.HeatResponse{Node: id, StepSeconds: 10, Metric: req.GetMetric(), Buckets: 256, OwnerNames: []string{"n1", "n2", "n3"}}
		for t := first; !t.After(fixedNow); t = t.Add(step) {
			ago := fixedNow.Sub(t)
			down := ago > 40*time.Minute && ago <= 45*time.Minute
			r.ColumnsUnixNanos = append(r.ColumnsUnixNanos, t.UnixNano())
			r.Present = append(r.Present, !down)
			for b := range 256 {
				// Each row of 16 buckets has one owner; the change 28 minutes ago moved the
				// hot row from n2 to n3.
				o := byte((b>>4)%3 + 1)
				switch {
				case down:
					o = 0
				case b>>4 == 4 && ago < 28*time.Minute:
					o = 3
				}
				r.Owners = append(r.Owners, o)
				v := uint64((b*7+n*3)%20 + 5)
				switch {
				case down:
					v = 0
				case b>>4 == 4 && ago < 20*time.Minute:
					v *= 40 // a hot row for the last 20 minutes
				}
				r.Values = append(r.Values, v)
			}
		}
		r.Events = []*kvpb.HeatEvent{
			{UnixNanos: fixedNow.Add(-40 * time.Minute).UnixNano(), Kind: "node-start", Text: id + " started"},
			{UnixNanos: fixedNow.Add(-30 * time.Minute).UnixNano(), Kind: "change-begin", Text: "ring change 3 begun: rebalance, 64.0 MiB/s"},
			{UnixNanos: fixedNow.Add(-28 * time.Minute).UnixNano(), Kind: "change-commit", Text: "ring change 3 committed: rebalance, epoch 7"},
		}
		out = append(out, r)
	}
	return out, nil
}

// fakeHist is a latency histogram of n samples at us µs, slow of them at slowUS.
func fakeHist(n int, us uint64, slow int, slowUS uint64) *kvpb.LatencyHistogram {
	var dense [kvpb.LatencyBuckets]uint64
	dense[kvpb.LatencyBucket(us)] += uint64(n - slow)
	dense[kvpb.LatencyBucket(slowUS)] += uint64(slow)
	return kvpb.NewLatencyHistogram(dense[:], max(us, slowUS), 0)
}

// Vnodes implements OnCall: each node coordinated 300 reads (p99 about 2ms) and 120 writes of
// every vnode over the last 10 s, but the hot vnode's reads have a slow tail (p99 about 40ms)
// and every 7th vnode saw only 10 writes per node (30 in all: no write p99). Its calls to n3
// for the hot vnode are slow; n3 timed out 4 times and had 12 reads hedged away.
func (fakeOnCall) Vnodes(context.Context, *kvpb.VnodesRequest) ([]*kvpb.VnodesResponse, error) {
	hot := 29 * fakeStep
	var out []*kvpb.VnodesResponse
	for _, id := range []string{"n1", "n2", "n3"} {
		r := &kvpb.VnodesResponse{Node: id, EndUnixNanos: fixedNow.UnixNano(), SliceSeconds: 5, WindowSeconds: 10, LongWindowSeconds: 60}
		for k := range FakeNodes * FakeVnodes {
			tok := uint64(k+1) * fakeStep
			v := &kvpb.VnodeLatency{Token: tok, Start: tok - fakeStep, Reads_10S: fakeHist(100, 400, 2, 1800), Writes_10S: fakeHist(40, 900, 1, 2500)}
			if k%7 == 3 {
				v.Writes_10S = fakeHist(10, 900, 0, 900)
			}
			if tok == hot {
				v.Reads_10S = fakeHist(1000, 500, 30, 40000)
			}
			for _, p := range []string{"n1", "n2", "n3"} {
				if p == id {
					continue
				}
				h := fakeHist(60, 300, 1, 900)
				if tok == hot && p == "n3" {
					h = fakeHist(60, 300, 12, 45000)
				}
				v.Replicas = append(v.Replicas, &kvpb.ReplicaLatency{Node: p, Calls_10S: h})
			}
			r.Vnodes = append(r.Vnodes, v)
		}
		for _, p := range []string{"n1", "n2", "n3"} {
			if p == id {
				continue
			}
			pl := &kvpb.PeerLatency{Node: p, Calls_10S: fakeHist(5000, 300, 50, 900)}
			if p == "n3" {
				pl.Timeouts_10S, pl.Hedges_10S = 2, 6
			}
			r.Peers = append(r.Peers, pl)
		}
		out = append(out, r)
	}
	return out, nil
}

// onCallConsole is console() on fakeOnCall: the hot-key alert polls, the history reads. It
// also waits until the console holds live hot keys.
func onCallConsole(t *testing.T, w, h int) *teatest.TestModel {
	t.Helper()
	tm, _ := consoleOf(t, w, h, func(f *FakeSource) Source { return fakeOnCall{f} }, func(m Model) bool { return m.live != nil })
	return tm
}

// TestGoldenOnCall draws the on-call view's screens: the overview with the hot-key alert, the
// heatmap's hot keys of the selected vnode (k), and the history view (4), at 80×24 and 160×48.
func TestGoldenOnCall(t *testing.T) {
	for _, sz := range []struct{ w, h int }{{80, 24}, {160, 48}} {
		for _, sc := range []struct {
			name, keys, want string
		}{
			{"alert", "", "hot key user:42 is 90% of vnode"},
			{"hotkeys", "2k", "Hot keys of vnode"},
			{"history", "4", "0x00-0x0f owner n1: "},
			{"history-row", "4↓↓↓↓", "0x40-0x4f owner n3 since"},
		} {
			t.Run(sc.name+"-"+itoa(sz.w)+"x"+itoa(sz.h), func(t *testing.T) {
				tm := onCallConsole(t, sz.w, sz.h)
				pressKeys(tm, sc.keys)
				if sc.keys != "" { // the alert was drawn before onCallConsole returned
					waitText(t, tm, sc.want)
				}
				teatest.RequireEqualOutput(t, finalScreen(t, tm, colorprofile.ANSI256))
			})
		}
	}
}

// TestGoldenLatency draws the heatmap coloured by the clients' read p99 and write p99 (m, m
// again), with the selected vnode's replicas as the coordinators see them, on the first vnode
// and on n2's hot vnode (its reads' slow tail, and n3 slow to answer it), at 80×24 and 160×48.
func TestGoldenLatency(t *testing.T) {
	for _, sz := range []struct{ w, h int }{{80, 24}, {160, 48}} {
		// The cursor to n2's 10th vnode: at 80 columns a node's 96 vnodes take two lines.
		toHot := strings.Repeat("↓", map[int]int{80: 2, 160: 1}[sz.w]) + strings.Repeat("→", 9)
		for _, sc := range []struct {
			name, keys, want string
		}{
			{"read-p99", "m", "read p99 (m)"},
			{"write-p99", "mm", "write p99 (m)"},
			{"replicas-hot", "m" + toHot, "38.2ms write"},
		} {
			t.Run(sc.name+"-"+itoa(sz.w)+"x"+itoa(sz.h), func(t *testing.T) {
				tm := onCallConsole(t, sz.w, sz.h)
				tm.Type("2")
				waitText(t, tm, "hedge") // the coordinators answered
				pressKeys(tm, sc.keys)
				waitText(t, tm, sc.want)
				teatest.RequireEqualOutput(t, finalScreen(t, tm, colorprofile.ANSI256))
			})
		}
	}
}

// pressKeys types keys, ↓ and → as arrow keys.
func pressKeys(tm *teatest.TestModel, keys string) {
	for _, k := range keys {
		switch k {
		case '↓':
			tm.Send(tea.KeyPressMsg{Code: tea.KeyDown})
		case '→':
			tm.Send(tea.KeyPressMsg{Code: tea.KeyRight})
		default:
			tm.Type(string(k))
		}
	}
}

// TestMetricCycle: m on the heatmap goes ops → read p99 → write p99 → the load metrics → ops.
func TestMetricCycle(t *testing.T) {
	m := New(Options{Source: fakeOnCall{NewFakeSource()}, Now: func() time.Time { return fixedNow }})
	m.view = ScreenHeatmap
	var got []string
	for range 7 {
		got = append(got, m.heat.Metric().String())
		next, _ := m.onKey(tea.KeyPressMsg{Code: 'm', Text: "m"})
		m = next.(Model)
	}
	want := "ops/s,read p99,write p99,writes/s,bytes,keys,ops/s"
	if strings.Join(got, ",") != want {
		t.Errorf("got %s, want %s", strings.Join(got, ","), want)
	}
}

// TestHistoryKeys: ←/→ scroll by half a window, z zooms 1h → 24h → 7d, ↑/↓ select a row; a
// scrolled window asks the nodes for the finest step that reaches its start.
func TestHistoryKeys(t *testing.T) {
	m := New(Options{Source: fakeOnCall{NewFakeSource()}, Now: func() time.Time { return fixedNow }})
	m.view = ScreenHistory
	press := func(code rune) {
		next, _ := m.onKey(tea.KeyPressMsg{Code: code})
		m = next.(Model)
	}
	press(tea.KeyLeft)
	press(tea.KeyLeft)
	if from, to := m.hist.window(fixedNow); m.hist.offset != 2 || !to.Equal(fixedNow.Add(-time.Hour)) || !from.Equal(fixedNow.Add(-2*time.Hour)) {
		t.Errorf("two scrolls back: got offset %d, window %v to %v; want 2, the hour before the last", m.hist.offset, from, to)
	}
	press(tea.KeyRight)
	press('z')
	if m.hist.zoom != 1 || m.hist.offset != 1 {
		t.Errorf("zoom: got zoom %d offset %d, want 24h, 1", m.hist.zoom, m.hist.offset)
	}
	press('z')
	press('z')
	if m.hist.zoom != 0 {
		t.Errorf("zoom cycles: got %d, want 0 (1h)", m.hist.zoom)
	}
	for range 20 {
		press(tea.KeyDown)
	}
	if m.hist.row != historyRows-1 {
		t.Errorf("row: got %d, want the last, %d", m.hist.row, historyRows-1)
	}
	m.hist.offset = m.hist.maxOffset()
	press(tea.KeyLeft)
	if m.hist.offset != m.hist.maxOffset() {
		t.Errorf("scroll past a week: got offset %d, want it held at %d", m.hist.offset, m.hist.maxOffset())
	}
}

// TestHistoryBadInput: a terminal too narrow and a window no node has data for are one line each.
func TestHistoryBadInput(t *testing.T) {
	m := New(Options{Source: fakeOnCall{NewFakeSource()}, Now: func() time.Time { return fixedNow }})
	m.view = ScreenHistory
	next, _ := m.Update(tea.WindowSizeMsg{Width: 30, Height: 20})
	m = next.(Model)
	if got := m.Render(); !strings.Contains(got, "widen to 40 columns (now 30)") {
		t.Errorf("narrow: got\n%s\nwant one line saying so", got)
	}
	next, _ = m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m = next.(Model)
	m.hist.seq = 1
	empty := &kvpb.HeatResponse{Node: "n1", StepSeconds: 10, Buckets: 256, ColumnsUnixNanos: []int64{fixedNow.UnixNano()}, Present: []bool{false}, Values: make([]uint64, 256)}
	next, _ = m.Update(HeatMsg{Seq: 1, Resp: []*kvpb.HeatResponse{empty}})
	m = next.(Model)
	if got := m.Render(); !strings.Contains(got, "no data from") || !strings.Contains(got, "no node has history for this window") {
		t.Errorf("no data: got\n%s\nwant one line saying so", got)
	}
}

// TestHotKeyAlertThreshold: a mild skew (the demo's zipf 1.1: its top key at 12% of 200 ops/s)
// raises no hot-key alert, also once a fourth node has joined that no client sends to; one key
// taking a node's worth of load does.
func TestHotKeyAlertThreshold(t *testing.T) {
	m := New(Options{Source: fakeOnCall{NewFakeSource()}, Now: func() time.Time { return fixedNow }})
	three, _ := NewFakeSource().Ring(context.Background())
	// A fourth node added: 32 vnodes of its own, between the others' tokens.
	four, _ := NewFakeSource().Ring(context.Background())
	n4 := &kvpb.Member{Id: "n4", GrpcAddr: "127.0.0.1:9094"}
	for k := range 32 {
		n4.Tokens = append(n4.Tokens, uint64(3*k+1)*fakeStep+fakeStep/2)
	}
	four.GetRing().Members = append(four.GetRing().Members, n4)
	tests := []struct {
		name         string
		ring         *kvpb.RingResponse
		total, key   float64
		share        float64
		coordinators int // 0: not known, the ring's members
		want         bool
	}{
		{"zipf 1.1 top key, 12% of 200 ops/s", three, 200, 24, 0.93, 0, false},
		{"deliberate skew, 300 of 500 ops/s on one key", three, 500, 300, 0.99, 0, true},
		{"zipf 1.1 top key, 14% of 200 ops/s, 3 nodes", three, 200, 28, 0.93, 3, false},
		{"zipf 1.1 top key, 14% of 200 ops/s through 3 of 4 nodes", four, 200, 28, 0.93, 3, false},
		{"a key at 20% of the cluster, through 3 of 4 nodes", four, 200, 40, 0.99, 3, true},
		{"a key at 20% of the cluster, through 4 nodes", four, 200, 40, 0.99, 4, true},
		{"a key at 20% of the cluster, 3 nodes", three, 200, 40, 0.99, 3, true},
		// Not knowing who coordinates, the share is over the ring's members (as it was for
		// every case: the demo's top key then alerted once n4 had joined).
		{"zipf 1.1 top key, 14% of 200 ops/s, 4 members", four, 200, 28, 0.93, 0, true},
	}
	for _, tt := range tests {
		next, _ := m.Update(RingMsg{Resp: tt.ring})
		m = next.(Model)
		m.live = &oncall.HotKeys{OpsPerSec: tt.total, Coordinators: tt.coordinators,
			Keys: []oncall.HotKey{{Key: "k", ReadsPerSec: tt.key, ShareOfVnode: tt.share, VnodeToken: fakeStep}}}
		if got := m.hotKeyAlert() != ""; got != tt.want {
			t.Errorf("%s: got alert %v (%q), want %v", tt.name, got, m.hotKeyAlert(), tt.want)
		}
	}
}
