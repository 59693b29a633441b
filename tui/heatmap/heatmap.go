// Package heatmap draws every vnode of the ring as one cell, a row per node holding the vnodes
// that node owns in token order, coloured by a chosen metric (load, or the clients' read or
// write p99) on a legend scale, with a cursor that selects a vnode, the selected vnode's
// replicas as the coordinators see them, and a list of the hottest vnodes.
package heatmap

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
	"ringkv/tui/keys"
	"ringkv/tui/styles"
)

// Metric is what the cells are coloured by.
type Metric int

// The metrics, in the order the metric key cycles through them: the load, then the clients'
// read and write p99 (what a page for latency asks first), then the rest.
const (
	Ops Metric = iota
	ReadP99
	WriteP99
	Writes
	Bytes
	Keys
	numMetrics
)

// Latency tells whether m is a latency (a p99 in µs, the highest of a group, not a sum).
func (m Metric) Latency() bool { return m == ReadP99 || m == WriteP99 }

// String names the metric as the legend shows it.
func (m Metric) String() string {
	switch m {
	case Ops:
		return "ops/s"
	case ReadP99:
		return "read p99"
	case WriteP99:
		return "write p99"
	case Writes:
		return "writes/s"
	case Bytes:
		return "bytes"
	case Keys:
		return "keys"
	}
	return "?"
}

// Cell is one vnode: the tokens t with Start < t <= End, owned by Node (its primary). The
// load is the vnode's cluster-wide load: Reads and Writes are summed over every replica that
// reported the range; Keys and Bytes are the owner's count (or the largest replica's when the
// owner did not report).
type Cell struct {
	Node       string
	Start, End uint64
	Replicas   []string // owner first
	Reads      float64  // per second, summed over replicas
	Writes     float64  // per second, summed over replicas
	Keys       uint64
	Bytes      uint64
	// ReadP99 and WriteP99 are the p99 of the clients' reads and writes of the vnode over the
	// last 10 s, merged over every coordinator; nil when fewer than kvpb.MinLatencySamples
	// operations (or not known yet): drawn "–", never 0.
	ReadP99, WriteP99 *time.Duration
	// Calls is what the coordinators saw of their calls to each replica, owner first; nil
	// when not known yet.
	Calls []ReplicaCalls
}

// ReplicaCalls is what the coordinators saw of their calls to one replica of a vnode.
type ReplicaCalls struct {
	Node string
	// Calls to it for this vnode over the last 10 s, and their p50 and p99 (nil: fewer than
	// kvpb.MinLatencySamples calls).
	Calls    uint64
	P50, P99 *time.Duration
	// Over all its vnodes, last 10 s: calls that missed their deadline, reads hedged to
	// another replica while it had not answered, and times its breaker opened.
	Timeouts, Hedges, Trips uint64
	// Breaker is its circuit breaker as the coordinators hold it now: "closed", or "open
	// (n1,n3)" naming the coordinators whose breaker is open.
	Breaker string
}

// p99 is the cell's p99 of metric m, nil when it has none.
func (c Cell) p99(m Metric) *time.Duration {
	if m == WriteP99 {
		return c.WriteP99
	}
	return c.ReadP99
}

// Value returns the cell's value of metric m (a p99 in µs, 0 when there is none).
func (c Cell) Value(m Metric) float64 {
	switch m {
	case ReadP99, WriteP99:
		if d := c.p99(m); d != nil {
			return float64(d.Microseconds())
		}
		return 0
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

// Row is the vnodes one node owns, in token order.
type Row struct {
	Node  string
	Down  bool
	Cells []Cell
}

// Group is what one drawn cell stands for: one vnode, or several consecutive ones when a row
// has more vnodes than the screen has room for.
type Group struct {
	Cells []Cell
}

// Value sums the group's cells; a latency is the highest of them.
func (g Group) Value(m Metric) float64 {
	var v float64
	for _, c := range g.Cells {
		if m.Latency() {
			v = max(v, c.Value(m))
			continue
		}
		v += c.Value(m)
	}
	return v
}

// GroupSize is the number of consecutive cells one drawn cell stands for when n cells share
// cols columns: ceil(n/cols), at least 1.
func GroupSize(n, cols int) int {
	if cols <= 0 || n <= cols {
		return 1
	}
	return (n + cols - 1) / cols
}

// Layout is how the rows are drawn: Group vnodes a drawn cell, CellWidth characters a cell,
// PerLine cells a line, Lines lines a node (a row that does not fit the width continues on
// the next line, when the height allows; otherwise cells group).
type Layout struct {
	CellWidth, PerLine, Lines, Group int
}

// maxWrap is the most lines one node's row is wrapped onto before cells group instead.
const maxWrap = 4

// fixedLines are the heatmap's lines besides the rows: legend, explanation, blank, selection (2).
const fixedLines = 5

// hottestRows is how many vnodes the hottest list shows when there is room.
const hottestRows = 5

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
	hottest int  // how many of the hottest groups are marked
	calls   bool // the selection shows its p99 and its replicas' calls (SetCalls)
}

// SetCalls says whether the cells carry latency (the console's source answers for it): the
// selection then shows its p99 and its replicas as the coordinators see them.
func (m *Model) SetCalls(on bool) { m.calls = on }

// New returns an empty heatmap.
func New(st styles.Styles, km keys.KeyMap) Model {
	return Model{st: st, km: km, hottest: 3, width: 80, height: 20}
}

// SetSize sets the area the heatmap draws in.
func (m *Model) SetSize(w, h int) { m.width, m.height = w, h; m.clamp() }

// SetRows replaces the data, keeping the cursor where it can.
func (m *Model) SetRows(rows []Row) { m.rows = rows; m.clamp() }

// Rows returns the data the heatmap draws (not a copy: read only).
func (m Model) Rows() []Row { return m.rows }

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

// Update moves the cursor and switches the metric. Up and down move a line: within a node's
// wrapped row first, then to the next node.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return m, nil
	}
	lay := m.Layout()
	switch {
	case key.Matches(k, m.km.Up):
		if m.col-lay.PerLine >= 0 {
			m.col -= lay.PerLine
		} else if m.row > 0 {
			m.row--
			last := (len(m.groups(m.row, lay.Group)) - 1) / lay.PerLine
			m.col += last * lay.PerLine
		}
	case key.Matches(k, m.km.Down):
		if n := len(m.groups(m.row, lay.Group)); m.col/lay.PerLine < (n-1)/lay.PerLine {
			m.col = min(m.col+lay.PerLine, n-1)
		} else if m.row < len(m.rows)-1 {
			m.row++
			m.col %= lay.PerLine
		}
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

// Layout returns how the rows are drawn at the current size.
func (m Model) Layout() Layout {
	n := m.maxCells()
	avail := max(1, m.width-m.labelWidth())
	switch {
	case n == 0:
		return Layout{CellWidth: 1, PerLine: 1, Lines: 1, Group: 1}
	case 2*n <= avail:
		return Layout{CellWidth: 2, PerLine: n, Lines: 1, Group: 1}
	case n <= avail:
		return Layout{CellWidth: 1, PerLine: n, Lines: 1, Group: 1}
	}
	if l := (n + avail - 1) / avail; l <= maxWrap && len(m.rows)*l <= m.height-fixedLines {
		return Layout{CellWidth: 1, PerLine: (n + l - 1) / l, Lines: l, Group: 1}
	}
	g := GroupSize(n, avail)
	return Layout{CellWidth: 1, PerLine: (n + g - 1) / g, Lines: 1, Group: g}
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
	n := len(m.groups(m.row, m.Layout().Group))
	m.col = max(0, min(m.col, n-1))
}

// Selected returns the group under the cursor.
func (m Model) Selected() (Group, bool) {
	if len(m.rows) == 0 {
		return Group{}, false
	}
	gs := m.groups(m.row, m.Layout().Group)
	if m.col >= len(gs) {
		return Group{}, false
	}
	return gs[m.col], true
}

// Hottest returns the n vnodes with the highest value of the metric, hottest first (ties in
// row and token order); vnodes at zero are left out.
func (m Model) Hottest(n int) []Cell {
	var all []Cell
	for _, r := range m.rows {
		for _, c := range r.Cells {
			if c.Value(m.metric) > 0 {
				all = append(all, c)
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Value(m.metric) > all[j].Value(m.metric) })
	return all[:min(n, len(all))]
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

// View draws the legend, the rows (one per node: the vnodes it owns), the selected vnode's
// details and, where there is room, the hottest vnodes.
func (m Model) View() string {
	if m.width < MinWidth {
		return clip(m.st.Down.Render(fmt.Sprintf("widen to %d columns (now %d)", MinWidth, m.width)), m.width)
	}
	var b strings.Builder
	lay := m.Layout()
	lw := m.labelWidth()
	type pos struct{ r, c int }
	var top float64
	var all []struct {
		p pos
		v float64
	}
	grid := make([][]Group, len(m.rows))
	for r := range m.rows {
		grid[r] = m.groups(r, lay.Group)
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

	// Legend and what a row and a cell are.
	legend := []string{fmt.Sprintf("metric %s (m)  log scale", m.metric)}
	levels := styles.HeatLevels
	if top <= 0 {
		levels = 0 // every level's bound would read ">0": say it once
	}
	for l := 0; l <= levels; l++ {
		lo := math.Expm1(math.Log1p(top) * float64(l-1) / styles.HeatLevels)
		label, glyph := "0", m.st.HeatGlyph[l]
		switch {
		case l > 0:
			label = ">" + FormatValue(m.metric, lo)
		case m.metric.Latency():
			label, glyph = fmt.Sprintf("<%d ops", MinSamples), present.NoSamples
		}
		legend = append(legend, m.st.Heat[l].Render(glyph)+m.st.Dim.Render(label))
	}
	switch {
	case top <= 0 && m.metric.Latency():
		legend = append(legend, m.st.Dim.Render(fmt.Sprintf("no vnode has %d ops in 10 s yet", MinSamples)))
	case top <= 0:
		legend = append(legend, m.st.Dim.Render("every vnode is at 0 (no "+m.metric.String()+" yet)"))
	case m.metric.Latency():
		legend = append(legend, m.st.Hot.Render(m.st.HotGlyph)+m.st.Dim.Render("slowest"))
	default:
		legend = append(legend, m.st.Hot.Render(m.st.HotGlyph)+m.st.Dim.Render("hottest"))
	}
	if lay.Group > 1 {
		legend = append(legend, m.st.Dim.Render(fmt.Sprintf("%d vnodes/cell", lay.Group)))
	}
	b.WriteString(strings.Join(legend, " "))
	b.WriteByte('\n')
	b.WriteString(m.st.Dim.Render(m.explain()))
	b.WriteByte('\n')

	// Rows: keep the cursor row visible when there are more nodes than lines; then one line
	// says which rows are drawn and where the hottest vnode is when its row is not.
	fit := max(1, (m.height-fixedLines)/lay.Lines)
	scrolled := len(m.rows) > fit
	if scrolled && fit > 1 {
		fit = max(1, (m.height-fixedLines-1)/lay.Lines)
	}
	first := 0
	if m.row >= fit {
		first = m.row - fit + 1
	}
	drawn := 0
	if scrolled {
		hotRow := -1
		if len(all) > 0 {
			hotRow = all[0].p.r
		}
		b.WriteString(m.st.Dim.Render(m.scrollLine(first, min(first+fit, len(m.rows)), hotRow)))
		b.WriteByte('\n')
		drawn++
	}
	for r := first; r < len(m.rows) && r < first+fit; r++ {
		name := m.rows[r].Node
		if len(name) > lw-1 {
			name = name[:lw-1]
		}
		for line := range lay.Lines {
			label := fmt.Sprintf("%-*s", lw, "")
			switch {
			case line == 0:
				label = fmt.Sprintf("%-*s", lw, name)
			case line == 1 && m.rows[r].Down:
				label = fmt.Sprintf("%-*s", lw, "DOWN")
			}
			if m.rows[r].Down {
				label = m.st.Down.Render(label)
			}
			lo, hi := line*lay.PerLine, min((line+1)*lay.PerLine, len(grid[r]))
			if lo >= hi && line > 0 {
				break
			}
			b.WriteString(label)
			for c := lo; c < hi; c++ {
				l := level(grid[r][c].Value(m.metric), top)
				glyph, st := m.st.HeatGlyph[l], m.st.Heat[l]
				if l == 0 && m.metric.Latency() {
					glyph = present.NoSamples
				}
				if hot[pos{r, c}] {
					glyph, st = m.st.HotGlyph, m.st.Hot
				}
				if r == m.row && c == m.col {
					st = st.Inherit(m.st.Cursor).Reverse(true)
				}
				b.WriteString(st.Render(strings.Repeat(glyph, lay.CellWidth)))
			}
			if line == 0 && m.rows[r].Down && lay.Lines == 1 {
				b.WriteString(" " + m.st.Down.Render("DOWN"))
			}
			b.WriteByte('\n')
			drawn++
		}
	}
	if len(m.rows) == 0 {
		b.WriteString(m.st.Dim.Render("waiting for ring and stats…"))
		b.WriteByte('\n')
		drawn++
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
		b.WriteString(fmt.Sprintf("%s %s of %s  range %s\n", m.st.Header.Render("selected"), what, first.Node, present.TokenRange(first.Start, last.End)))
		p99 := ""
		if m.calls && len(sel.Cells) == 1 {
			p99 = fmt.Sprintf(" · p99 read %s write %s", latency(first.ReadP99), latency(first.WriteP99))
		}
		b.WriteString(fmt.Sprintf("replicas %s%s · load %s r/s + %s w/s (all replicas) · %s keys, %s\n",
			strings.Join(first.Replicas, ","), p99, FormatRate(rd), FormatRate(wr), present.Count(float64(ks)), present.BytesShort(float64(bs))))
		drawn += 3
		if room := m.height - (2 + drawn); m.calls && room >= 2 {
			lines := m.callsPanel(sel, room)
			for _, l := range lines {
				b.WriteString(l + "\n")
			}
			drawn += len(lines)
		}
	}

	// The hottest vnodes (the slowest, by a latency), as many as fit.
	if room := m.height - (2 + drawn) - 3; room >= 1 {
		if hs := m.Hottest(min(room, hottestRows)); len(hs) > 0 {
			b.WriteByte('\n')
			title, c3, c4, c5 := "hottest vnodes by "+m.metric.String(), "w/s", "keys", "size"
			if m.metric.Latency() {
				title, c3, c4, c5 = "slowest vnodes by "+m.metric.String(), "rd-p99", "wr-p99", ""
			}
			b.WriteString(m.st.Header.Render(title) + "\n")
			b.WriteString(m.st.Dim.Render(strings.TrimRight(fmt.Sprintf("  %-17s  %-*s %-*s %7s %7s %7s %8s", "range", lw-1, "owner", replicasWidth(hs), "replicas", "ops/s", c3, c4, c5), " ")) + "\n")
			for _, c := range hs {
				v3, v4, v5 := FormatRate(c.Writes), present.Count(float64(c.Keys)), present.BytesShort(float64(c.Bytes))
				if m.metric.Latency() {
					v3, v4, v5 = latency(c.ReadP99), latency(c.WriteP99), ""
				}
				b.WriteString(strings.TrimRight(fmt.Sprintf("  %s  %-*s %-*s %7s %7s %7s %8s", present.TokenRangeShort(c.Start, c.End),
					lw-1, c.Node, replicasWidth(hs), strings.Join(c.Replicas, ","),
					FormatRate(c.Reads+c.Writes), v3, v4, v5), " ") + "\n")
			}
		}
	}
	return clip(b.String(), m.width)
}

// scrollLine says which rows [first, end) of the nodes are drawn and, when the hottest
// vnode's row hot (-1: none) is not among them, which node owns it, so a hot spot is never
// out of sight.
func (m Model) scrollLine(first, end, hot int) string {
	s := fmt.Sprintf("nodes %d–%d of %d", first+1, end, len(m.rows))
	if hot >= 0 && (hot < first || hot >= end) {
		dir := "↓"
		if hot < first {
			dir = "↑"
		}
		s += fmt.Sprintf(" · hot vnode: %s, row %d %s", m.rows[hot].Node, hot+1, dir)
	}
	return s + " · ↑/↓ scrolls"
}

// explain says what a row and a cell are.
func (m Model) explain() string {
	what := "load over all replicas"
	switch m.metric {
	case Keys, Bytes:
		what = "owner's " + m.metric.String()
	case ReadP99, WriteP99:
		what = fmt.Sprintf("clients' %s, last 10 s, all coordinators", m.metric)
	}
	return "row = vnodes the node owns, in token order · cell = " + what
}

// MinWidth is the narrowest the heatmap is drawn: below it, one line says so.
const MinWidth = 40

// MinSamples is the fewest operations a p99 is shown for (kvpb.MinLatencySamples).
const MinSamples = 50

// latency is a p99 as the heatmap shows it: present.NoSamples when there is none.
func latency(d *time.Duration) string {
	if d == nil {
		return present.NoSamples
	}
	return present.Latency(*d)
}

// callsPanel is the selected vnode's replicas as the coordinators see their calls to them,
// in at most room lines: a header and a line per replica.
func (m Model) callsPanel(sel Group, room int) []string {
	if len(sel.Cells) != 1 {
		return []string{m.st.Dim.Render(fmt.Sprintf("replica latency: select one vnode (a cell is %d vnodes at this width)", len(sel.Cells)))}
	}
	c := sel.Cells[0]
	if c.Calls == nil {
		return []string{m.st.Dim.Render("replica latency: asking the coordinators…")}
	}
	lines := []string{m.st.Dim.Render(fmt.Sprintf("%-9s %6s %7s %7s %5s %5s %5s  %-9s · calls to it for this vnode, 10 s; t/o hedge trips: all its vnodes",
		"replica", "calls", "p50", "p99", "t/o", "hedge", "trips", "breaker"))}
	for _, rc := range c.Calls {
		if len(lines) == room {
			break
		}
		name := rc.Node
		if rc.Node == c.Node {
			name += "*"
		}
		l := fmt.Sprintf("%-9s %6s %7s %7s %5d %5d %5d  %s", name, present.Count(float64(rc.Calls)), latency(rc.P50), latency(rc.P99), rc.Timeouts, rc.Hedges, rc.Trips, rc.Breaker)
		if rc.Breaker != present.BreakerState(kvpb.BreakerState_CLOSED) || rc.Timeouts > 0 {
			l = m.st.Down.Render(l)
		}
		lines = append(lines, l)
	}
	return lines
}

func replicasWidth(cs []Cell) int {
	w := len("replicas")
	for _, c := range cs {
		w = max(w, len(strings.Join(c.Replicas, ",")))
	}
	return w
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
	case ReadP99, WriteP99:
		return present.Latency(time.Duration(v) * time.Microsecond)
	case Bytes:
		return present.BytesShort(v)
	case Keys:
		return present.Count(v)
	}
	return FormatRate(v)
}

// FormatRate formats a per-second rate compactly: 0.4, 7.5, 950, 1.2k, 3.4M (one decimal
// below 10, so a light load does not read as none).
func FormatRate(v float64) string {
	if v > 0 && v < 9.95 {
		return fmt.Sprintf("%.1f", v)
	}
	return present.Count(v)
}
