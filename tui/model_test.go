package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

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

// TestHeatmapNeverWraps draws 96 vnodes a node at several widths: cells group, lines fit.
func TestHeatmapNeverWraps(t *testing.T) {
	m := loaded(t, func() time.Time { return fixedNow })
	rows := m.heatRows()
	for _, w := range []int{20, 40, 80, 101, 160} {
		h := heatmap.New(styles.DefaultStyles(), keys.DefaultKeyMap())
		h.SetRows(rows)
		h.SetSize(w, 24)
		cols, g := h.Layout()
		if cols > w-5 || cols*g < FakeVnodes {
			t.Errorf("width %d: got %d columns of %d vnodes, want at most %d columns covering %d", w, cols, g, w-5, FakeVnodes)
		}
		for i, l := range strings.Split(h.View(), "\n") {
			if lw := lipgloss.Width(l); lw > w {
				t.Errorf("width %d: line %d is %d wide", w, i, lw)
			}
		}
		mm := m
		nm, _ := mm.Update(tea.WindowSizeMsg{Width: w, Height: 24})
		for i, l := range strings.Split(nm.(Model).Render(), "\n") {
			if lw := lipgloss.Width(l); lw > w {
				t.Errorf("console width %d: line %d is %d wide", w, i, lw)
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
