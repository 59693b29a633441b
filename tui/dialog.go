package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"ringkv/tui/keys"
	"ringkv/tui/styles"
)

type dialogKind int

const (
	dialogNone dialogKind = iota
	dialogInput
	dialogConfirm
	dialogBusy
	dialogResult
)

// maxInput is the longest text an input dialog takes.
const maxInput = 128

// dialog is the console's modal box, a component: an input (a line of text for "add" or
// "bench"), a confirmation (its command runs on yes), "working…" while that command runs,
// or a result (any key closes it). The zero dialog is closed. The root model opens one with
// the constructors below, forwards keys to Update while it is open and draws View over the
// body.
type dialog struct {
	kind  dialogKind
	title string
	body  []string
	// input: what the text is for ("add", "bench"); Enter answers with an inputMsg.
	input string
	text  textinput.Model
	// confirm: the command run on yes.
	onYes tea.Cmd
	err   bool

	st    styles.Styles
	km    keys.KeyMap
	width int
}

// newInput opens an input dialog for what, titled title, with prompt above the field.
func newInput(st styles.Styles, km keys.KeyMap, what, title, prompt string) (dialog, tea.Cmd) {
	t := textinput.New()
	t.Prompt = "> "
	t.CharLimit = maxInput
	s := t.Styles()
	s.Cursor.Blink = false
	t.SetStyles(s)
	cmd := t.Focus()
	return dialog{kind: dialogInput, title: title, body: []string{prompt}, input: what, text: t, st: st, km: km}, cmd
}

// newConfirm opens a confirmation that runs onYes on yes.
func newConfirm(st styles.Styles, km keys.KeyMap, title string, body []string, onYes tea.Cmd) dialog {
	return dialog{kind: dialogConfirm, title: title, body: body, onYes: onYes, st: st, km: km}
}

// newResult opens a result; bad draws the body as an error.
func newResult(st styles.Styles, km keys.KeyMap, title string, body []string, bad bool) dialog {
	return dialog{kind: dialogResult, title: title, body: body, err: bad, st: st, km: km}
}

// open tells whether the dialog is showing.
func (d dialog) open() bool { return d.kind != dialogNone }

// SetSize sets the screen the dialog is drawn on; the box is at most 72 cells wide.
func (d *dialog) SetSize(w, _ int) {
	d.width = w
	d.text.SetWidth(max(0, d.boxWidth()-len(d.text.Prompt)-1))
}

func (d dialog) boxWidth() int { return max(20, min(72, d.width-6)) }

// Update handles a key while the dialog is open (and the input's own messages).
func (d dialog) Update(msg tea.Msg) (dialog, tea.Cmd) {
	k, isKey := msg.(tea.KeyPressMsg)
	switch d.kind {
	case dialogInput:
		if isKey {
			switch k.String() {
			case "esc":
				return dialog{}, nil
			case "enter":
				in := inputMsg{what: d.input, value: strings.TrimSpace(d.text.Value())}
				return d, func() tea.Msg { return in }
			}
		}
		var cmd tea.Cmd
		d.text, cmd = d.text.Update(msg)
		return d, cmd
	case dialogConfirm:
		if !isKey {
			return d, nil
		}
		switch {
		case key.Matches(k, d.km.Confirm):
			cmd := d.onYes
			return dialog{kind: dialogBusy, title: d.title, body: []string{"working…"}, st: d.st, km: d.km, width: d.width}, cmd
		case key.Matches(k, d.km.Cancel), key.Matches(k, d.km.Quit):
			return dialog{}, nil
		}
	case dialogResult:
		if isKey {
			return dialog{}, nil
		}
	}
	return d, nil
}

// View draws the box.
func (d dialog) View() string {
	w := d.boxWidth()
	var b strings.Builder
	b.WriteString(d.st.DialogTitle.Render(d.title))
	b.WriteString("\n\n")
	for _, l := range d.body {
		switch {
		case d.err:
			// An error is read in full: wrap it rather than cut it.
			for _, wl := range strings.Split(ansi.Wrap(l, w, " "), "\n") {
				b.WriteString(d.st.Down.Render(wl) + "\n")
			}
		case strings.HasPrefix(l, " "):
			b.WriteString(clipLine(l, w) + "\n") // a table row: cut, to keep the columns
		default:
			// Prose (a plan's warnings, why a rebalance moves nothing) is read in full.
			b.WriteString(ansi.Wrap(l, w, " ") + "\n")
		}
	}
	switch d.kind {
	case dialogInput:
		b.WriteString("\n" + d.text.View() + "\n\n" + d.st.Dim.Render("enter submit · esc cancel"))
	case dialogConfirm:
		b.WriteString("\n" + d.st.Dim.Render("y/enter confirm · n/esc cancel"))
	case dialogResult:
		b.WriteString("\n" + d.st.Dim.Render("press any key"))
	}
	return d.st.Dialog.Render(strings.TrimRight(b.String(), "\n"))
}
