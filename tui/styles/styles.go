// Package styles holds the one set of lipgloss styles the console draws with.
package styles

import (
	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"
)

// HeatLevels is the number of non-zero steps on the heatmap's legend scale.
const HeatLevels = 4

// Styles is every style the console uses. Colours are picked from the 256-colour palette so
// they downsample to distinct 16-colour ones; meaning never rests on colour alone (the heatmap
// also varies its glyph, states are spelled out).
type Styles struct {
	Title     lipgloss.Style
	Tab       lipgloss.Style
	ActiveTab lipgloss.Style
	Header    lipgloss.Style
	Dim       lipgloss.Style
	Selected  lipgloss.Style
	Hint      lipgloss.Style

	Up   lipgloss.Style
	Down lipgloss.Style
	Warn lipgloss.Style

	Dialog      lipgloss.Style
	DialogTitle lipgloss.Style

	BarFull  lipgloss.Style
	BarEmpty lipgloss.Style
	Spark    lipgloss.Style

	// Heat[0] is a zero cell, Heat[1..HeatLevels] cold to hot.
	Heat [HeatLevels + 1]lipgloss.Style
	// HeatGlyph pairs with Heat: the cell's character at each level.
	HeatGlyph [HeatLevels + 1]string
	// Hot marks the hottest cells; Cursor the selected one.
	Hot      lipgloss.Style
	HotGlyph string
	Cursor   lipgloss.Style
	Help     help.Styles
}

// DefaultStyles returns the console's styles for a dark terminal.
func DefaultStyles() Styles {
	c := lipgloss.Color
	s := Styles{
		Title:     lipgloss.NewStyle().Bold(true).Foreground(c("15")).Background(c("24")).Padding(0, 1),
		Tab:       lipgloss.NewStyle().Foreground(c("245")).Padding(0, 1),
		ActiveTab: lipgloss.NewStyle().Bold(true).Foreground(c("0")).Background(c("117")).Padding(0, 1),
		Header:    lipgloss.NewStyle().Bold(true).Foreground(c("117")),
		Dim:       lipgloss.NewStyle().Foreground(c("245")),
		Selected:  lipgloss.NewStyle().Reverse(true),
		Hint:      lipgloss.NewStyle().Foreground(c("229")),
		Up:        lipgloss.NewStyle().Foreground(c("34")),
		Down:      lipgloss.NewStyle().Bold(true).Foreground(c("196")),
		Warn:      lipgloss.NewStyle().Foreground(c("214")),
		Dialog: lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(c("214")).
			Padding(0, 1),
		DialogTitle: lipgloss.NewStyle().Bold(true).Foreground(c("214")),
		BarFull:     lipgloss.NewStyle().Foreground(c("34")),
		BarEmpty:    lipgloss.NewStyle().Foreground(c("240")),
		Spark:       lipgloss.NewStyle().Foreground(c("75")),
		Hot:         lipgloss.NewStyle().Bold(true).Foreground(c("15")).Background(c("160")),
		HotGlyph:    "▲",
		Cursor:      lipgloss.NewStyle().Reverse(true).Bold(true),
		HeatGlyph:   [HeatLevels + 1]string{"·", "░", "▒", "▓", "█"},
		Help:        help.DefaultDarkStyles(),
	}
	heat := []string{"240", "33", "40", "220", "196"}
	for i, h := range heat {
		s.Heat[i] = lipgloss.NewStyle().Foreground(c(h))
	}
	return s
}
