package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"ringkv/proto/kvpb"
	"ringkv/tui/keys"
	"ringkv/tui/styles"
)

// TestInputDialog types into the add and bench dialogs, as an operator does, and reads what
// the console asks for: a plan of the node typed, a confirmation of the rate, or what a
// malformed answer should have been.
func TestInputDialog(t *testing.T) {
	tests := []struct {
		name      string
		open      string // the key that opens the dialog
		typed     string
		wantPlan  *kvpb.ChangeRequest
		wantTitle string
		wantBody  string
	}{
		{name: "add", open: "a", typed: "n4=127.0.0.1:9094",
			wantPlan: &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4", GrpcAddr: "127.0.0.1:9094"}},
		{name: "add typo fixed with backspace", open: "a", typed: "n5\b4=h:1",
			wantPlan: &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4", GrpcAddr: "h:1"}},
		{name: "add without address", open: "a", typed: "n4", wantTitle: "Add a node", wantBody: "want ID=ADDR"},
		{name: "bench", open: "b", typed: " 500 ", wantTitle: "Start bench", wantBody: "at 500 req/s"},
		{name: "bench not a number", open: "b", typed: "fast", wantTitle: "Start a background bench", wantBody: "want a positive rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Options{Source: NewFakeSource(), Actions: FakeActions{}, Now: func() time.Time { return fixedNow }})
			press := func(k tea.KeyPressMsg) tea.Cmd {
				t.Helper()
				nm, cmd := m.Update(k)
				m = nm.(Model)
				return cmd
			}
			press(tea.KeyPressMsg{Code: rune(tt.open[0]), Text: tt.open})
			if m.dialog.kind != dialogInput {
				t.Fatalf("got dialog %d after %q, want an input", m.dialog.kind, tt.open)
			}
			for _, r := range tt.typed {
				if r == '\b' {
					press(tea.KeyPressMsg{Code: tea.KeyBackspace})
					continue
				}
				press(tea.KeyPressMsg{Code: r, Text: string(r)})
			}
			want := []rune{}
			for _, r := range tt.typed {
				if r == '\b' {
					want = want[:len(want)-1]
					continue
				}
				want = append(want, r)
			}
			if got := ansi.Strip(m.dialog.View()); !strings.Contains(got, "> "+string(want)) {
				t.Errorf("got dialog %q, want %q in it", got, "> "+string(want))
			}
			// Enter answers with what was typed; the model acts on it.
			msg := press(tea.KeyPressMsg{Code: tea.KeyEnter})()
			nm, cmd := m.Update(msg)
			m = nm.(Model)
			if tt.wantPlan != nil {
				if cmd == nil {
					t.Fatalf("got no command after enter, want a plan")
				}
				pm, ok := cmd().(PlanMsg)
				if !ok || pm.Req.GetKind() != tt.wantPlan.GetKind() || pm.Req.GetNodeId() != tt.wantPlan.GetNodeId() || pm.Req.GetGrpcAddr() != tt.wantPlan.GetGrpcAddr() {
					t.Errorf("got plan of %v, want %v", pm.Req, tt.wantPlan)
				}
				return
			}
			if m.dialog.title != tt.wantTitle || !strings.Contains(strings.Join(m.dialog.body, "\n"), tt.wantBody) {
				t.Errorf("got dialog %q %q, want %q containing %q", m.dialog.title, m.dialog.body, tt.wantTitle, tt.wantBody)
			}
		})
	}
}

// TestDialogSize: the box follows the screen's width, and never exceeds 72 cells.
func TestDialogSize(t *testing.T) {
	for _, tt := range []struct{ screen, want int }{{30, 24}, {80, 72}, {200, 72}, {10, 20}} {
		d := newResult(styles.DefaultStyles(), keys.DefaultKeyMap(), "t", []string{strings.Repeat("x", 100)}, false)
		d.SetSize(tt.screen, 20)
		if got := d.boxWidth(); got != tt.want {
			t.Errorf("screen %d: got box width %d, want %d", tt.screen, got, tt.want)
		}
	}
}

// TestDialogWrapsProse: a plan's warning (why a rebalance moves nothing) is read in full,
// wrapped; a table row keeps its columns and is cut.
func TestDialogWrapsProse(t *testing.T) {
	why := "warning: with 3 replicas on 3 nodes every node holds every key, so no vnode move changes any node's load: nothing to rebalance (add nodes to spread it)"
	row := "  n1         share  34.0% →  34.0%  vnodes 96 → 96  load 120 → 120 op/s and more columns than fit"
	d := newResult(styles.DefaultStyles(), keys.DefaultKeyMap(), "Plan: rebalance — nothing to move", []string{why, row}, false)
	d.SetSize(80, 20)
	view := ansi.Strip(d.View())
	flat := strings.Join(strings.Fields(strings.ReplaceAll(view, "│", "")), " ")
	if !strings.Contains(flat, "(add nodes to spread it)") {
		t.Errorf("got dialog\n%s\nwant the whole warning", view)
	}
	if strings.Contains(flat, "columns than fit") {
		t.Errorf("got dialog\n%s\nwant the table row cut", view)
	}
}

// TestPlanRefused: a plan with refusals is shown as a result, its title saying so on one
// line (test/TestDemoWalkInTmux retries on it), with each refusal in the body and no
// question to confirm.
func TestPlanRefused(t *testing.T) {
	m := New(Options{Source: NewFakeSource(), Actions: FakeActions{}, Now: func() time.Time { return fixedNow }})
	nm, _ := m.Update(tea.WindowSizeMsg{Width: 160, Height: 48})
	m = nm.(Model)
	req := &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4", GrpcAddr: "127.0.0.1:9094"}
	why := "n4 at 127.0.0.1:9094 does not answer: DeadlineExceeded: context deadline exceeded"
	nm, _ = m.Update(PlanMsg{Req: req, Plan: &kvpb.ChangePlan{Request: req, Refusals: []string{why}}})
	m = nm.(Model)
	view := ansi.Strip(m.dialog.View())
	if !strings.Contains(view, "Plan: add n4 (127.0.0.1:9094) — refused") {
		t.Errorf("got dialog\n%s\nwant the title %q on one line", view, "Plan: add n4 (127.0.0.1:9094) — refused")
	}
	flat := strings.Join(strings.Fields(strings.ReplaceAll(view, "│", "")), " ")
	if !strings.Contains(flat, "does not answer: DeadlineExceeded") || strings.Contains(flat, "Start this change?") {
		t.Errorf("got dialog\n%s\nwant the refusal and no question", view)
	}
}
