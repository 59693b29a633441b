package tui

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"ringkv/proto/kvpb"
	"ringkv/tui/heatmap"
	"ringkv/tui/keys"
	"ringkv/tui/styles"
)

// loaded returns a model that has handled the fake source's status, ring and samples.
func loaded(t *testing.T, now func() time.Time) Model {
	t.Helper()
	src := NewFakeSource()
	defer src.Close()
	m := New(Options{Source: src, Now: now})
	step := func(msg tea.Msg) {
		nm, _ := m.Update(msg)
		m = nm.(Model)
	}
	st, _ := src.Status(t.Context())
	step(StatusMsg{Resp: st})
	rg, _ := src.Ring(t.Context())
	step(RingMsg{Resp: rg})
	for range FakeNodes * FakeSamples {
		step(StatsMsg{Stats: <-src.Stats()})
	}
	return m
}

func TestSort(t *testing.T) {
	now := func() time.Time { return fixedNow }
	tests := []struct {
		presses int
		want    string
	}{
		{0, "n1 n2 n3"}, // node
		{1, "n2 n3 n1"}, // ops/s
		{2, "n3 n2 n1"}, // p99
		{5, "n1 n2 n3"}, // share: n1 34%, ties keep node order
		{6, "n1 n2 n3"}, // wraps to node
	}
	for _, tt := range tests {
		m := loaded(t, now)
		for range tt.presses {
			nm, _ := m.Update(tea.KeyPressMsg{Code: 's', Text: "s"})
			m = nm.(Model)
		}
		var got []string
		for _, n := range m.rows() {
			got = append(got, n.id)
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("sort %s: got %q, want %q", sortNames[m.sortBy], g, tt.want)
		}
	}
}

func TestDownAfterDeadline(t *testing.T) {
	now := fixedNow
	m := loaded(t, func() time.Time { return now })
	tick := func() {
		nm, _ := m.Update(TickMsg{})
		m = nm.(Model)
	}
	tests := []struct {
		after    time.Duration
		feedN1   bool // n1 keeps sending
		wantDown string
	}{
		{after: time.Second, feedN1: true, wantDown: ""},
		{after: 1400 * time.Millisecond, feedN1: true, wantDown: ""},
		{after: 1600 * time.Millisecond, feedN1: true, wantDown: "n2 n3"},
		{after: 3200 * time.Millisecond, feedN1: false, wantDown: "n1 n2 n3"},
	}
	start := now
	for _, tt := range tests {
		now = start.Add(tt.after)
		if tt.feedN1 {
			nm, _ := m.Update(StatsMsg{Stats: &kvpb.NodeStats{Id: "n1"}})
			m = nm.(Model)
		}
		tick()
		var down []string
		for _, id := range m.sortedIDs() {
			if m.nodes[id].displayState() == "DOWN" {
				down = append(down, id)
			}
		}
		if g := strings.Join(down, " "); g != tt.wantDown {
			t.Errorf("after %s: got down %q, want %q", tt.after, g, tt.wantDown)
		}
	}
	if !strings.Contains(m.Render(), "node n2 is DOWN") {
		t.Errorf("got no DOWN alert for n2 in:\n%s", m.Render())
	}
	// n2 answers again: UP.
	nm, _ := m.Update(StatsMsg{Stats: &kvpb.NodeStats{Id: "n2"}})
	m = nm.(Model)
	if got := m.nodes["n2"].displayState(); got != "UP" {
		t.Errorf("after a new sample: got n2 %s, want UP", got)
	}
}

func TestGroupSize(t *testing.T) {
	tests := []struct{ n, cols, want int }{
		{64, 75, 1}, {75, 75, 1}, {76, 75, 2}, {96, 75, 2}, {288, 75, 4}, {10, 0, 1}, {5, 1, 5},
	}
	for _, tt := range tests {
		if got := heatmap.GroupSize(tt.n, tt.cols); got != tt.want {
			t.Errorf("GroupSize(%d, %d): got %d, want %d", tt.n, tt.cols, got, tt.want)
		}
	}
}

// TestHeatmapNeverWraps draws 96 vnodes a node at several sizes: every vnode is drawn once
// (on continuation lines or grouped), lines fit the width, and no line repeats the one above.
func TestHeatmapNeverWraps(t *testing.T) {
	m := loaded(t, func() time.Time { return fixedNow })
	rows := m.heatRows()
	tests := []struct {
		w, h      int
		wantLines int // per node
		wantGroup int
	}{
		{20, 24, 1, 7}, {40, 24, 3, 1}, {80, 24, 2, 1}, {80, 8, 1, 2}, {101, 24, 1, 1}, {160, 48, 1, 1}, {200, 48, 1, 1},
	}
	for _, tt := range tests {
		h := heatmap.New(styles.DefaultStyles(), keys.DefaultKeyMap())
		h.SetRows(rows)
		h.SetSize(tt.w, tt.h)
		lay := h.Layout()
		if lay.Lines != tt.wantLines || lay.Group != tt.wantGroup {
			t.Errorf("%dx%d: got %d lines a node of %d vnodes a cell, want %d of %d", tt.w, tt.h, lay.Lines, lay.Group, tt.wantLines, tt.wantGroup)
		}
		if lay.PerLine*lay.CellWidth > tt.w-5 || lay.PerLine*lay.Lines*lay.Group < FakeVnodes {
			t.Errorf("%dx%d: got %d cells of %d wide on %d lines of %d vnodes, want them to cover %d within %d columns",
				tt.w, tt.h, lay.PerLine, lay.CellWidth, lay.Lines, lay.Group, FakeVnodes, tt.w-5)
		}
		lines := strings.Split(h.View(), "\n")
		for i, l := range lines {
			if lw := lipgloss.Width(l); lw > tt.w {
				t.Errorf("%dx%d: line %d is %d wide", tt.w, tt.h, i, lw)
			}
			if i > 0 && l != "" && l == lines[i-1] {
				t.Errorf("%dx%d: line %d repeats the line above: %q", tt.w, tt.h, i, ansi.Strip(l))
			}
		}
		mm := m
		nm, _ := mm.Update(tea.WindowSizeMsg{Width: tt.w, Height: tt.h})
		for i, l := range strings.Split(nm.(Model).Render(), "\n") {
			if lw := lipgloss.Width(l); lw > tt.w {
				t.Errorf("console %dx%d: line %d is %d wide", tt.w, tt.h, i, lw)
			}
		}
	}
}

// TestHeatRowsByOwner: every node reports all 288 ranges it replicates; the heatmap has one row
// per node with the 96 vnodes it owns, and the hot range (owned by n2) is hot in n2's row only,
// with its load summed over the replicas and its owner first among them.
func TestHeatRowsByOwner(t *testing.T) {
	m := loaded(t, func() time.Time { return fixedNow })
	rows := m.heatRows()
	if len(rows) != FakeNodes {
		t.Fatalf("got %d rows, want %d", len(rows), FakeNodes)
	}
	seen := map[uint64]string{}
	for _, r := range rows {
		if len(r.Cells) != FakeVnodes {
			t.Errorf("row %s: got %d cells, want %d", r.Node, len(r.Cells), FakeVnodes)
		}
		for i, c := range r.Cells {
			if o, dup := seen[c.End]; dup {
				t.Errorf("vnode %016x in rows %s and %s, want one", c.End, o, r.Node)
			}
			seen[c.End] = r.Node
			if i > 0 && c.End <= r.Cells[i-1].End {
				t.Errorf("row %s: cell %d not in token order", r.Node, i)
			}
			if len(c.Replicas) != 3 || c.Replicas[0] != r.Node {
				t.Errorf("row %s cell %d: got replicas %v, want 3 with the owner first", r.Node, i, c.Replicas)
			}
			hot := c.Reads+c.Writes > 1000
			if want := r.Node == "n2" && i == 9; hot != want {
				t.Errorf("row %s cell %d: got %.0f ops/s, hot %v, want hot %v", r.Node, i, c.Reads+c.Writes, hot, want)
			}
			if hot && (c.Reads != 4000 || c.Writes != 3000) {
				t.Errorf("hot cell: got %.0f r/s %.0f w/s, want 4000 r/s (spread) and 3000 w/s (1000 on each of 3 replicas)", c.Reads, c.Writes)
			}
		}
	}
	h := heatmap.New(styles.DefaultStyles(), keys.DefaultKeyMap())
	h.SetRows(rows)
	if hs := h.Hottest(5); len(hs) != 5 || hs[0].Node != "n2" || hs[0].Reads+hs[0].Writes != 7000 {
		t.Errorf("got hottest %+v, want 5 with n2's 7000 ops/s vnode first", hs)
	}
}

// TestHeatRowsNodeDown: a down node's reports no longer count, its row stays (marked down),
// and the other replicas' reports still show the load of its ranges.
func TestHeatRowsNodeDown(t *testing.T) {
	now := fixedNow
	m := loaded(t, func() time.Time { return now })
	now = now.Add(time.Hour)
	for _, id := range []string{"n1", "n3"} {
		nm, _ := m.Update(StatsMsg{Stats: m.nodes[id].stats})
		m = nm.(Model)
	}
	nm, _ := m.Update(TickMsg{})
	m = nm.(Model)
	for _, r := range m.heatRows() {
		if r.Down != (r.Node == "n2") {
			t.Errorf("row %s: got down %v", r.Node, r.Down)
		}
		if r.Node == "n2" {
			want := 4000.0*2/3 + 2*1000
			if c := r.Cells[9]; math.Abs(c.Reads+c.Writes-want) > 0.01 || c.Keys != 128 {
				t.Errorf("n2's hot vnode with n2 down: got %.0f ops/s %d keys, want %.0f and 128 from the other two replicas", c.Reads+c.Writes, c.Keys, want)
			}
		}
	}
}

func TestReadonlyHasNoActions(t *testing.T) {
	src := NewFakeSource()
	defer src.Close()
	m := New(Options{Source: src, Actions: FakeActions{}, Readonly: true})
	for _, k := range []string{"d", "a", "r", "p", "b"} {
		nm, cmd := m.Update(tea.KeyPressMsg{Code: rune(k[0]), Text: k})
		if nm.(Model).dialog.kind != dialogNone || cmd != nil {
			t.Errorf("readonly key %s: got a dialog or command", k)
		}
	}
}

// TestFakePlanFollowsRequest: the fake plan moves the drained node's share away, and only its.
func TestFakePlanFollowsRequest(t *testing.T) {
	for _, id := range []string{"n1", "n2", "n3"} {
		p, err := FakeActions{}.PlanChange(t.Context(), &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REMOVE, NodeId: id})
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, a := range p.GetAfter() {
			sum += a.GetShare()
			if gone := a.GetShare() == 0; gone != (a.GetId() == id) {
				t.Errorf("drain %s: got %s at %.2f after, want only %s at 0", id, a.GetId(), a.GetShare(), id)
			}
		}
		if sum < 0.999 || sum > 1.001 {
			t.Errorf("drain %s: got shares summing to %.3f after, want 1", id, sum)
		}
	}
}

// TestWarningLine: a warning shows under the hint in every view and the screen keeps its height.
func TestWarningLine(t *testing.T) {
	src := NewFakeSource()
	defer src.Close()
	m := New(Options{Source: src, Hint: "hint", Warning: "fill: 900 errors: unavailable 900"})
	nm, _ := m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m = nm.(Model)
	for _, k := range []string{"1", "2", "3"} {
		nm, _ := m.Update(tea.KeyPressMsg{Code: rune(k[0]), Text: k})
		lines := strings.Split(ansi.Strip(nm.(Model).Render()), "\n")
		if len(lines) != 24 || lines[2] != "⚠ fill: 900 errors: unavailable 900" {
			t.Errorf("view %s: got %d lines, line 3 %q; want 24 with the warning third", k, len(lines), lines[min(2, len(lines)-1)])
		}
	}
}

// TestHeatmapCursor moves over rows wrapped onto two lines (96 vnodes at 80 columns): down
// goes to the continuation line first, then to the next node; up comes back the same way.
func TestHeatmapCursor(t *testing.T) {
	m := loaded(t, func() time.Time { return fixedNow })
	h := heatmap.New(styles.DefaultStyles(), keys.DefaultKeyMap())
	h.SetRows(m.heatRows())
	h.SetSize(80, 20)
	if lay := h.Layout(); lay.Lines != 2 || lay.PerLine != 48 {
		t.Fatalf("got layout %+v, want 2 lines of 48", lay)
	}
	press := func(k string) {
		if k == "u" { // ↑ (k lists a vnode's hot keys)
			h, _ = h.Update(tea.KeyPressMsg{Code: tea.KeyUp})
			return
		}
		h, _ = h.Update(tea.KeyPressMsg{Code: rune(k[0]), Text: k})
	}
	type rc struct{ row, col int }
	tests := []struct {
		keys string
		want rc
	}{
		{"lll", rc{0, 3}},
		{"j", rc{0, 51}},
		{"j", rc{1, 3}},
		{"u", rc{0, 51}},
		{"u", rc{0, 3}},
		{"u", rc{0, 3}}, // top: stays
		{"jjjjjj", rc{2, 51}},
		{"j", rc{2, 51}}, // bottom: stays
	}
	for _, tt := range tests {
		for _, k := range tt.keys {
			press(string(k))
		}
		if r, c := h.Cursor(); (rc{r, c}) != tt.want {
			t.Errorf("after %q: got row %d col %d, want %d %d", tt.keys, r, c, tt.want.row, tt.want.col)
		}
	}
}

// TestDownNodeIsUnknown: what only a node's samples tell (ops, latency, keys, disk, breakers)
// reads "-" while it is DOWN, not the zeros or the stale values of its last sample.
func TestDownNodeIsUnknown(t *testing.T) {
	now := fixedNow
	m := loaded(t, func() time.Time { return now })
	now = now.Add(1600 * time.Millisecond)
	nm, _ := m.Update(StatsMsg{Stats: &kvpb.NodeStats{Id: "n1"}})
	nm, _ = nm.Update(StatsMsg{Stats: &kvpb.NodeStats{Id: "n3"}})
	nm, _ = nm.Update(TickMsg{})
	m = nm.(Model)
	var row string
	for _, l := range strings.Split(ansi.Strip(m.Render()), "\n") {
		if strings.HasPrefix(l, "n2 ") {
			row = l
		}
	}
	got := strings.Fields(row)
	// n2 DOWN ops [spark] p50 p99 err/s keys disk breaker share
	want := []string{"n2", "DOWN", "-", "-", "-", "-", "-", "-", "-", "33.0%"}
	var cells []string
	for _, f := range got {
		if !strings.ContainsAny(f, "▁▂▃▄▅▆▇█") {
			cells = append(cells, f)
		}
	}
	if strings.Join(cells, " ") != strings.Join(want, " ") {
		t.Errorf("got n2's row %q, want cells %q", row, want)
	}
}

// TestErrorRates: the overview shows a node's errors per second, and an alert names them by
// kind, from the counts of two samples.
func TestErrorRates(t *testing.T) {
	m := loaded(t, func() time.Time { return fixedNow })
	at := fixedNow.UnixNano()
	for i, errs := range []map[string]uint64{{"unavailable": 100}, {"unavailable": 120, "timeout": 5}} {
		nm, _ := m.Update(StatsMsg{Stats: &kvpb.NodeStats{Id: "n2", UnixNanos: at + int64(i)*int64(time.Second), Errors: errs}})
		m = nm.(Model)
	}
	screen := ansi.Strip(m.Render())
	if want := "✖ node n2 answers 25 errors/s: unavailable 20, timeout 5.0"; !strings.Contains(screen, want) {
		t.Errorf("got screen\n%s\nwant it to hold %q", screen, want)
	}
	if got := m.nodes["n1"].errRate(); got != 0 {
		t.Errorf("got n1 %v errors/s, want 0", got)
	}
}

// TestBenchResultWhenStopped: stopping the console's background bench shows what it measured,
// in a dialog and in the event log.
func TestBenchResultWhenStopped(t *testing.T) {
	m := loaded(t, func() time.Time { return fixedNow })
	for _, msg := range []tea.Msg{BenchMsg{Rate: 500}, BenchMsg{Rate: 0, Result: FakeBenchResult}} {
		nm, _ := m.Update(msg)
		m = nm.(Model)
	}
	screen := ansi.Strip(m.Render())
	for _, want := range []string{"Bench at 500 req/s stopped", "p99 2.10ms"} {
		if !strings.Contains(screen, want) {
			t.Errorf("got screen\n%s\nwant %q", screen, want)
		}
	}
	if last := m.events[len(m.events)-1].text; last != "bench stopped: "+FakeBenchResult {
		t.Errorf("got last event %q, want the bench's result", last)
	}
}

// chartActions draws a fixed chart of the size asked and records the size.
type chartActions struct {
	FakeActions
	w, h *int
}

func (c chartActions) BenchChart(width, height int) string {
	*c.w, *c.h = width, height
	return "p99 (ms) per second\n  12.0 ┤ ╭─╮\n▲ begin 8s"
}

// TestBenchChartLive: while the background bench runs, the overview draws its chart (asked
// of the actions once a second, at the body's width and the lines left under the table and
// the alerts) in place of the events; stopping the bench takes it away.
func TestBenchChartLive(t *testing.T) {
	var w, h int
	src := NewFakeSource()
	defer src.Close()
	m := New(Options{Source: src, Actions: chartActions{w: &w, h: &h}, Now: func() time.Time { return fixedNow }, Tick: 250 * time.Millisecond})
	step := func(msg tea.Msg) tea.Cmd {
		nm, cmd := m.Update(msg)
		m = nm.(Model)
		return cmd
	}
	step(tea.WindowSizeMsg{Width: 100, Height: 40})
	st, _ := src.Status(t.Context())
	step(StatusMsg{Resp: st})
	step(BenchMsg{Rate: 500})
	var drawn tea.Msg
	for range 4 { // a second of ticks
		if cmd := step(TickMsg{}); cmd != nil {
			if msgs, ok := cmd().(tea.BatchMsg); ok {
				for _, c := range msgs {
					if c == nil {
						continue
					}
					if msg, ok := c().(BenchChartMsg); ok {
						drawn = msg
					}
				}
			}
		}
	}
	if drawn == nil {
		t.Fatal("no chart drawn within a second of ticks")
	}
	if w != 100 || h < minBenchChart || h >= 40 {
		t.Errorf("chart asked at %dx%d, want 100 wide and the lines left in a 40-line body", w, h)
	}
	step(drawn)
	screen := ansi.Strip(m.Render())
	for _, want := range []string{"Bench 500 req/s", "p99 (ms) per second", "▲ begin 8s"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	if strings.Contains(screen, "Events") {
		t.Errorf("the chart should take the events' place:\n%s", screen)
	}
	step(BenchMsg{Rate: 0})
	if screen := ansi.Strip(m.Render()); strings.Contains(screen, "p99 (ms) per second") {
		t.Errorf("chart still drawn after the bench stopped:\n%s", screen)
	}
}

// TestAdminActionsBenchResult: AdminActions.StopBench returns what the bench measured.
func TestAdminActionsBenchResult(t *testing.T) {
	a := &AdminActions{Bench: func(ctx context.Context, rate int) (string, error) {
		<-ctx.Done()
		return fmt.Sprintf("ran at %d/s", rate), nil
	}}
	if err := a.StartBench(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	got, err := a.StopBench(t.Context())
	if err != nil || got != "ran at 7/s" {
		t.Errorf("got %q, %v; want \"ran at 7/s\"", got, err)
	}
	if got, err := a.StopBench(t.Context()); got != "" || err != nil {
		t.Errorf("stop with no bench: got %q, %v; want nothing", got, err)
	}
}

// TestHotNodeFloor: an idle cluster raises no hot-node alert, however uneven its trickle; a
// busy one says the load is the clients' requests the node coordinates.
func TestHotNodeFloor(t *testing.T) {
	for _, tt := range []struct {
		ops  []float64
		want string // "" = no alert
	}{
		{ops: []float64{0.03, 0.005, 0.005}, want: ""},
		{ops: []float64{3000, 500, 500}, want: "▲ hot node n1: 3.0k client ops/s, 2.2× the mean"},
	} {
		m := loaded(t, func() time.Time { return fixedNow })
		for i, ops := range tt.ops {
			nm, _ := m.Update(StatsMsg{Stats: &kvpb.NodeStats{Id: fmt.Sprintf("n%d", i+1), OpsPerSec: ops}})
			m = nm.(Model)
		}
		var got string
		for _, a := range m.alerts() {
			if a = ansi.Strip(a); strings.Contains(a, "hot node") {
				got = a
			}
		}
		if got != tt.want {
			t.Errorf("ops %v: got alert %q, want %q", tt.ops, got, tt.want)
		}
	}
}

// TestChangeETA: the changes screen spells a change's ETA as kvctl does (present.ETA):
// "3m4s", not "3m04s".
func TestChangeETA(t *testing.T) {
	m := loaded(t, func() time.Time { return fixedNow })
	p := fakeChange()
	p.EtaSeconds = 184
	nm, _ := m.Update(ChangeMsg{Progress: p})
	m = nm.(Model)
	m.view = ScreenChanges
	screen := ansi.Strip(m.Render())
	if want := "ETA 3m4s"; !strings.Contains(screen, want) {
		t.Errorf("got screen\n%s\nwant it to hold %q", screen, want)
	}
}
