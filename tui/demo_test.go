package tui

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// fakeNodes records the stops and starts the console asks for.
type fakeNodes struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeNodes) StopNode(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "stop "+id)
	return nil
}

func (f *fakeNodes) StartNode(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "start "+id)
	return nil
}

// demoModel is a loaded console with spares and node control, as the demo opens it.
func demoModel(t *testing.T, nc NodeControl, spares []Spare) Model {
	t.Helper()
	src := NewFakeSource()
	t.Cleanup(src.Close)
	m := New(Options{Source: src, Actions: FakeActions{}, Nodes: nc, Spares: spares, Now: func() time.Time { return fixedNow }})
	st, _ := src.Status(t.Context())
	nm, _ := m.Update(StatusMsg{Resp: st})
	m = nm.(Model)
	nm, _ = m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	return nm.(Model)
}

func press(t *testing.T, m Model, k string) (Model, tea.Cmd) {
	t.Helper()
	msg := tea.KeyPressMsg{Code: rune(k[0]), Text: k}
	if k == "enter" {
		msg = tea.KeyPressMsg{Code: tea.KeyEnter}
	}
	nm, cmd := m.Update(msg)
	return nm.(Model), cmd
}

// TestAddOffersSpare: with a spare awaiting admission, a alone plans the add of the first
// spare that is not a member yet (one key, then y to confirm the plan).
func TestAddOffersSpare(t *testing.T) {
	spares := []Spare{{ID: "n3", Addr: "127.0.0.1:9093"}, {ID: "n4", Addr: "127.0.0.1:9094"}, {ID: "n5", Addr: "127.0.0.1:9095"}}
	m := demoModel(t, &fakeNodes{}, spares)
	if got := ansi.Strip(m.footer()); !strings.Contains(got, "a add n4") || !strings.Contains(got, "x/X stop/start") {
		t.Errorf("got footer %q, want the add of n4 and x/X in it", got)
	}
	m, cmd := press(t, m, "a")
	if cmd == nil {
		t.Fatalf("got no command after a, want the plan of adding n4")
	}
	pm, ok := cmd().(PlanMsg)
	if !ok || pm.Req.GetNodeId() != "n4" || pm.Req.GetGrpcAddr() != "127.0.0.1:9094" {
		t.Fatalf("got %#v, want the plan of adding n4=127.0.0.1:9094 (n3 is a member)", pm.Req)
	}
	nm, _ := m.Update(pm)
	m = nm.(Model)
	if m.dialog.kind != dialogConfirm || !strings.Contains(ansi.Strip(m.dialog.View()), "add n4") {
		t.Errorf("got dialog %q (kind %d):\n%s\nwant the plan of adding n4 to confirm", m.dialog.title, m.dialog.kind, ansi.Strip(m.dialog.View()))
	}
}

// TestNodeControlKeys: x and X stop and start the selected node after a confirmation, and the
// console logs it; without node control (a real cluster) they do nothing and are not shown.
func TestNodeControlKeys(t *testing.T) {
	nc := &fakeNodes{}
	m := demoModel(t, nc, nil)
	for _, k := range []string{"x", "X"} {
		var cmd tea.Cmd
		m, _ = press(t, m, k)
		if m.dialog.kind != dialogConfirm || !strings.Contains(m.dialog.title, "n1") {
			t.Fatalf("after %s: got dialog %q (kind %d), want a confirmation for n1", k, m.dialog.title, m.dialog.kind)
		}
		m, cmd = press(t, m, "y")
		if cmd == nil {
			t.Fatalf("after %s, y: got no command", k)
		}
		nm, _ := m.Update(cmd())
		m = nm.(Model)
		if m.dialog.open() {
			t.Errorf("after %s: got dialog %q open, want it closed", k, m.dialog.title)
		}
	}
	if got, want := strings.Join(nc.calls, ", "), "stop n1, start n1"; got != want {
		t.Errorf("got calls %q, want %q", got, want)
	}
	events := ansi.Strip(m.eventLines(5))
	if !strings.Contains(events, "n1's process stopped") || !strings.Contains(events, "n1's process started") {
		t.Errorf("got events\n%s\nwant the stop and the start", events)
	}

	plain := demoModel(t, nil, nil)
	if got := ansi.Strip(plain.footer()); strings.Contains(got, "x/X") {
		t.Errorf("without node control: got footer %q, want no x/X", got)
	}
	for _, k := range []string{"x", "X"} {
		if m, cmd := press(t, plain, k); m.dialog.open() || cmd != nil {
			t.Errorf("without node control, %s: got dialog %q or a command", k, m.dialog.title)
		}
	}
}
