// Package heatmap draws every vnode of the ring as one cell, a row per node in token order,
// coloured by a chosen metric on a legend scale, with a cursor that selects a vnode.
package heatmap

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"ringkv/tui/keys"
	"ringkv/tui/styles"
)

// Metric is what the cells are coloured by.
type Metric int

// The metrics, in the order the metric key cycles through them.
const (
	Ops Metric = iota
	Writes
	Bytes
	Keys
	numMetrics
)

// String names the metric as the legend shows it.
func (m Metric) String() string {
	switch m {
	case Ops:
		return "ops/s"
	case Writes:
		return "writes/s"
	case Bytes:
		return "bytes"
	case Keys:
		return "keys"
	}
	return "?"
}

// Cell is one vnode: the tokens t with Start < t <= End, owned by Node.
type Cell struct {
	Node       string
	Start, End uint64
	Replicas   []string
	Reads      float64 // per second
	Writes     float64 // per second
	Keys       uint64
	Bytes      uint64
}

// Value returns the cell's value of metric m.
func (c Cell) Value(m Metric) float64 {
	switch m {
	case Ops:
		return c.Reads + c.Writes
	case Writes:
		return c.Writes
	case Bytes:
		return float64(c.Bytes)
	case Keys:
		return float64(c.Keys)
	}
	return 0
}

// Row is one node's vnodes in token order.
type Row struct {
	Node  string
	Down  bool
	Cells []Cell
}

// Group is what one drawn cell stands for: one vnode, or several consecutive ones when a row
// has more vnodes than there are columns.
type Group struct {
	Cells []Cell
}

// Value sums the group's cells.
func (g Group) Value(m Metric) float64 {
	var v float64
	for _, c := range g.Cells {
		v += c.Value(m)
	}
	return v
}

// Groups splits n cells into at most cols groups of equal size (the last may be shorter):
// the group size is ceil(n/cols). It returns the group size.
func GroupSize(n, cols int) int {
	if cols <= 0 || n <= cols {
		return 1
	}
	return (n + cols - 1) / cols
}

// Model is the heatmap component. The zero value is not usable; use New.
type Model struct {
	st      styles.Styles
	km      keys.KeyMap
	rows    []Row
	metric  Metric
	row     int // cursor row
	col     int // cursor column, in groups
	width   int
	height  int
	hottest int // how many of the hottest groups are marked
}

// New returns an empty heatmap.
func New(st styles.Styles, km keys.KeyMap) Model {
	return Model{st: st, km: km, hottest: 3, width: 80, height: 20}
}

// SetSize sets the area the heatmap draws in.
func (m *Model) SetSize(w, h int) { m.width, m.height = w, h; m.clamp() }

// SetRows replaces the data, keeping the cursor where it can.
func (m *Model) SetRows(rows []Row) { m.rows = rows; m.clamp() }

// Metric is the metric cells are coloured by.
func (m Model) Metric() Metric { return m.metric }

// SetMetric selects the metric.
func (m *Model) SetMetric(x Metric) { m.metric = x % numMetrics }

// Cursor returns the cursor's row and group column.
func (m Model) Cursor() (row, col int) { return m.row, m.col }

// SelectedNode is the node of the cursor's row, "" when there are no rows.
func (m Model) SelectedNode() string {
	if m.row < len(m.rows) {
		return m.rows[m.row].Node
	}
	return ""
}

// Update moves the cursor and switches the metric.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return m, nil
	}
	switch {
	case key.Matches(k, m.km.Up):
		m.row--
	case key.Matches(k, m.km.Down):
		m.row++
	case key.Matches(k, m.km.Left):
		m.col--
	case key.Matches(k, m.km.Right):
		m.col++
	case key.Matches(k, m.km.Metric):
		m.metric = (m.metric + 1) % numMetrics
	}
	m.clamp()
	return m, nil
}

func (m Model) labelWidth() int {
	w := 4
	for _, r := range m.rows {
		w = max(w, len(r.Node))
	}
	return min(w, 10) + 1
}

func (m Model) maxCells() int {
	n := 0
	for _, r := range m.rows {
		n = max(n, len(r.Cells))
	}
	return n
}

// Layout returns the number of drawn columns and the vnodes per drawn cell.
func (m Model) Layout() (cols, groupSize int) {
	avail := max(1, m.width-m.labelWidth())
	g := GroupSize(m.maxCells(), avail)
	n := m.maxCells()
	return (n + g - 1) / g, g
}

// groups returns row r cut into groups of size g.
func (m Model) groups(r, g int) []Group {
	cells := m.rows[r].Cells
	var out []Group
	for i := 0; i < len(cells); i += g {
		out = append(out, Group{Cells: cells[i:min(i+g, len(cells))]})
	}
	return out
}

func (m *Model) clamp() {
	if len(m.rows) == 0 {
		m.row, m.col = 0, 0
		return
	}
	m.row = max(0, min(m.row, len(m.rows)-1))
	_, g := m.Layout()
	n := len(m.groups(m.row, g))
	m.col = max(0, min(m.col, n-1))
}

// Selected returns the group under the cursor.
func (m Model) Selected() (Group, bool) {
	if len(m.rows) == 0 {
		return Group{}, false
	}
	_, g := m.Layout()
	gs := m.groups(m.row, g)
	if m.col >= len(gs) {
		return Group{}, false
	}
	return gs[m.col], true
}

// level maps v on [0, top] to 0..HeatLevels on a log scale (one hot spot must not flatten
// the rest); 0 only for zero.
func level(v, top float64) int {
	if v <= 0 || top <= 0 {
		return 0
	}
	l := int(math.Ceil(math.Log1p(v) / math.Log1p(top) * styles.HeatLevels))
	return max(1, min(l, styles.HeatLevels))
}

// View draws the legend, one line per node and the selected vnode's details.
func (m Model) View() string {
	var b strings.Builder
	cols, g := m.Layout()
	_ = cols
	lw := m.labelWidth()
	type pos struct{ r, c int }
	var top float64
	var all []struct {
		p pos
		v float64
	}
	grid := make([][]Group, len(m.rows))
	for r := range m.rows {
		grid[r] = m.groups(r, g)
		for c, gr := range grid[r] {
			v := gr.Value(m.metric)
			top = max(top, v)
			if v > 0 {
				all = append(all, struct {
					p pos
					v float64
				}{pos{r, c}, v})
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].v > all[j].v })
	hot := map[pos]bool{}
	for i := 0; i < len(all) && i < m.hottest && all[i].v >= top/2; i++ {
		hot[all[i].p] = true
	}

	// Legend.
	legend := []string{fmt.Sprintf("metric %s (m)  log scale", m.metric)}
	for l := 0; l <= styles.HeatLevels; l++ {
		lo := math.Expm1(math.Log1p(top) * float64(l-1) / styles.HeatLevels)
		label := "0"
		if l > 0 {
			label = ">" + FormatValue(m.metric, lo)
		}
		legend = append(legend, m.st.Heat[l].Render(m.st.HeatGlyph[l])+m.st.Dim.Render(label))
	}
	legend = append(legend, m.st.Hot.Render(m.st.HotGlyph)+m.st.Dim.Render("hottest"))
	if g > 1 {
		legend = append(legend, m.st.Dim.Render(fmt.Sprintf("%d vnodes/cell", g)))
	}
	b.WriteString(strings.Join(legend, " "))
	b.WriteByte('\n')

	// Rows: keep the cursor row visible when there are more nodes than lines.
	avail := max(1, m.height-5)
	first := 0
	if m.row >= avail {
		first = m.row - avail + 1
	}
	// With room to spare each node's row is drawn up to 3 lines tall, so the map fills the
	// screen instead of leaving it empty; the label and a DOWN mark sit on the first line.
	rh := 1
	if n := len(m.rows); n > 0 && n <= avail {
		rh = max(1, min(3, avail/n))
	}
	for r := first; r < len(m.rows) && r < first+avail; r++ {
		name := m.rows[r].Node
		if len(name) > lw-1 {
			name = name[:lw-1]
		}
		for line := range rh {
			label := fmt.Sprintf("%-*s", lw, "")
			if line == 0 {
				label = fmt.Sprintf("%-*s", lw, name)
			}
			if line == 1 && m.rows[r].Down {
				label = fmt.Sprintf("%-*s", lw, "DOWN")
			}
			if m.rows[r].Down {
				label = m.st.Down.Render(label)
			}
			b.WriteString(label)
			for c, gr := range grid[r] {
				l := level(gr.Value(m.metric), top)
				glyph, st := m.st.HeatGlyph[l], m.st.Heat[l]
				if hot[pos{r, c}] {
					glyph, st = m.st.HotGlyph, m.st.Hot
				}
				if r == m.row && c == m.col {
					st = st.Inherit(m.st.Cursor).Reverse(true)
				}
				b.WriteString(st.Render(glyph))
			}
			b.WriteByte('\n')
		}
	}
	if len(m.rows) == 0 {
		b.WriteString(m.st.Dim.Render("waiting for ring and stats…"))
		b.WriteByte('\n')
	}

	// Details of the selection.
	if sel, ok := m.Selected(); ok && len(sel.Cells) > 0 {
		first, last := sel.Cells[0], sel.Cells[len(sel.Cells)-1]
		var rd, wr float64
		var ks, bs uint64
		for _, c := range sel.Cells {
			rd += c.Reads
			wr += c.Writes
			ks += c.Keys
			bs += c.Bytes
		}
		what := "vnode"
		if len(sel.Cells) > 1 {
			what = fmt.Sprintf("%d vnodes", len(sel.Cells))
		}
		b.WriteByte('\n')
		b.WriteString(fmt.Sprintf("%s %s of %s  range (%016x, %016x]\n", m.st.Header.Render("selected"), what, first.Node, first.Start, last.End))
		b.WriteString(fmt.Sprintf("replicas %s · load %s r/s, %s w/s · %s keys, %s\n",
			strings.Join(first.Replicas, ","), FormatRate(rd), FormatRate(wr), FormatCount(float64(ks)), FormatBytes(float64(bs))))
	}
	return clip(b.String(), m.width)
}

// clip truncates every line to w cells so nothing wraps.
func clip(s string, w int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if lipgloss.Width(l) > w {
			lines[i] = ansi.Truncate(l, w, "")
		}
	}
	return strings.Join(lines, "\n")
}

// FormatValue formats v as metric m shows it.
func FormatValue(m Metric, v float64) string {
	switch m {
	case Bytes:
		return FormatBytes(v)
	case Keys:
		return FormatCount(v)
	}
	return FormatRate(v)
}

// FormatRate formats a per-second rate compactly: 950, 1.2k, 3.4M.
func FormatRate(v float64) string { return FormatCount(v) }

// FormatCount formats a count compactly: 950, 1.2k, 3.4M.
func FormatCount(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.1fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// FormatBytes formats a byte count in binary units as cli.Humanize does, but shorter:
// 512 B, 1.5 KiB, 600 KiB, 20 MiB, 3.1 GiB (one decimal below 10, none above).
func FormatBytes(v float64) string {
	const unit = 1024
	if v < unit {
		return fmt.Sprintf("%.0f B", max(v, 0))
	}
	exp := 0
	for v >= unit && exp < 5 {
		v /= unit
		exp++
	}
	if v < 9.95 {
		return fmt.Sprintf("%.1f %ciB", v, "BKMGTP"[exp])
	}
	return fmt.Sprintf("%.0f %ciB", v, "BKMGTP"[exp])
}
