package tui

import (
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
)

// lineInput is a one-line text field: typed text appends, backspace deletes.
type lineInput struct {
	value string
}

const maxInput = 128

func (l lineInput) update(k tea.KeyPressMsg) lineInput {
	switch k.String() {
	case "backspace":
		if l.value != "" {
			_, n := utf8.DecodeLastRuneInString(l.value)
			l.value = l.value[:len(l.value)-n]
		}
	case "ctrl+u":
		l.value = ""
	default:
		if k.Text != "" && len(l.value)+len(k.Text) <= maxInput {
			l.value += k.Text
		}
	}
	return l
}

func (l lineInput) view() string { return "> " + l.value + "█" }
