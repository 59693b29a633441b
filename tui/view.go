package tui

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
	"ringkv/tui/heatmap"
)

// View draws the whole screen in the alternate screen buffer: every line clipped to the width,
// exactly the terminal's height, so nothing wraps.
func (m Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	v.WindowTitle = "ringkv console"
	return v
}

// Render returns the screen's content.
func (m Model) Render() string {
	head := m.head()
	foot := []string{m.footer()}
	bodyH := m.bodyHeight()

	var body string
	switch {
	case m.showHelp:
		body = m.st.Header.Render("Keys") + "\n\n" + m.fullHelp()
		if m.opts.Readonly {
			body += "\n\n" + m.st.Dim.Render("readonly: actions are disabled")
		}
		body += "\n\n" + m.st.Dim.Render("press any key to close")
	case m.view == ScreenHeatmap:
		h := m.heat
		h.SetSize(m.width, bodyH)
		body = h.View()
	case m.view == ScreenChanges:
		body = m.changesView(bodyH)
	case m.view == ScreenHistory:
		body = m.historyView(bodyH)
	default:
		body = m.overviewView(bodyH)
	}
	if m.dialog.open() {
		d := m.dialog
		d.SetSize(m.width, bodyH)
		body = lipgloss.Place(m.width, bodyH, lipgloss.Center, lipgloss.Center, d.View())
	}
	lines := append(head, fit(body, m.width, bodyH)...)
	lines = append(lines, foot...)
	for i, l := range lines {
		lines[i] = clipLine(l, m.width)
	}
	return strings.Join(lines, "\n")
}

// head is the lines above the body: the title, the hint and the warning.
func (m Model) head() []string {
	head := []string{m.titleLine()}
	if m.opts.Hint != "" {
		head = append(head, m.st.Hint.Render(m.opts.Hint))
	}
	if m.opts.Warning != "" {
		head = append(head, m.st.Down.Render("⚠ "+m.opts.Warning))
	}
	return head
}

// bodyHeight is the height of the body: the screen less the head and the footer.
func (m Model) bodyHeight() int {
	n := 2 // title, footer
	if m.opts.Hint != "" {
		n++
	}
	if m.opts.Warning != "" {
		n++
	}
	return max(1, m.height-n)
}

func clipLine(l string, w int) string {
	if lipgloss.Width(l) > w {
		return ansi.Truncate(l, w, "")
	}
	return l
}

// fit returns exactly h lines of s, each clipped to w.
func fit(s string, w, h int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	for i, l := range lines {
		lines[i] = clipLine(l, w)
	}
	return lines
}

func (m Model) titleLine() string {
	parts := []string{m.st.Title.Render("ringkv")}
	for i, name := range viewNames {
		if Screen(i) == m.view && !m.showHelp {
			parts = append(parts, m.st.ActiveTab.Render(name))
		} else {
			parts = append(parts, m.st.Tab.Render(name))
		}
	}
	info := fmt.Sprintf(" epoch %d · %d nodes · N=%d", m.epoch, len(m.nodes), m.replicas)
	if m.bench > 0 {
		info += fmt.Sprintf(" · bench %d/s", m.bench)
	}
	return strings.Join(parts, "") + m.st.Dim.Render(info)
}

func (m Model) footer() string {
	var left string
	switch m.view {
	case ScreenOverview:
		left = m.st.Dim.Render("sort " + sortNames[m.sortBy])
	case ScreenHeatmap:
		left = m.st.Dim.Render("metric " + m.heat.Metric().String())
	case ScreenHistory:
		left = m.st.Dim.Render("zoom " + zooms[m.hist.zoom].name)
	}
	if m.opts.Readonly {
		left += m.st.Warn.Render(" readonly")
	}
	if m.lastErr != "" {
		left += " " + m.st.Down.Render(m.lastErr)
	}
	h := m.help
	if left != "" {
		left += "  "
	}
	h.SetWidth(max(0, m.width-lipgloss.Width(left)))
	return left + h.ShortHelpView(m.shortHelp())
}

// shortHelp is the footer's keys for the current view, with short texts so that "? help" and
// "q quit" fit 80 columns.
func (m Model) shortHelp() []key.Binding {
	short := func(b key.Binding, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(b.Keys()...), key.WithHelp(b.Help().Key, desc))
	}
	tab := short(m.km.NextView, "view")
	help, quit := short(m.km.Help, "help"), short(m.km.Quit, "quit")
	if m.showHelp {
		return []key.Binding{help, quit}
	}
	// Where the console runs the nodes (the demo), what a newcomer tries first: add a spare,
	// stop and start a node.
	var demo []key.Binding
	if m.km.StopNode.Enabled() {
		if sp := m.spare(); sp != nil && m.km.Add.Enabled() {
			demo = append(demo, short(m.km.Add, "add "+sp.ID))
		}
		demo = append(demo, key.NewBinding(key.WithKeys("x", "X"), key.WithHelp("x/X", "stop/start")))
	}
	switch m.view {
	case ScreenOverview:
		sel := key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑↓", "select node"))
		return slices.Concat([]key.Binding{tab, sel, short(m.km.Sort, "sort")}, demo, []key.Binding{help, quit})
	case ScreenHeatmap:
		sel := key.NewBinding(key.WithKeys("up", "down", "left", "right"), key.WithHelp("←↑↓→", "select vnode"))
		return slices.Concat([]key.Binding{tab, sel, short(m.km.Metric, "metric"), short(m.km.HotKeys, "hot keys")}, demo, []key.Binding{help, quit})
	case ScreenHistory:
		scroll := key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←→", "scroll"))
		return []key.Binding{tab, scroll, short(m.km.Zoom, "zoom"), help, quit}
	}
	return slices.Concat([]key.Binding{tab}, demo, []key.Binding{help, quit})
}

// Overview columns and widths; the sparkline takes what is left.
type column struct {
	title string
	width int
}

func (m Model) overviewView(h int) string {
	rows := m.rows()
	nameW := 4
	for _, n := range rows {
		nameW = max(nameW, len(n.id))
	}
	nameW = min(nameW, 12)
	cols := []column{{"NODE", nameW}, {"STATE", 7}, {"OPS/S", 6}, {"LAST MINUTE", 0}, {"P50", 6}, {"P99", 6}, {"ERR/S", 5}, {"KEYS", 6}, {"DISK", 8}, {"BREAKER", 7}, {"SHARE", 6}}
	fixed := 0
	for _, c := range cols {
		fixed += c.width + 1
	}
	sparkW := min(sparkSamples, m.width-fixed)
	if sparkW < 4 {
		sparkW = 0
	}
	cols[3].width = sparkW

	var b strings.Builder
	var hdr []string
	for i, c := range cols {
		if c.width == 0 {
			continue
		}
		t := c.title
		if m.sortBy != sortNode && sortTitle(m.sortBy) == t {
			t += "↓"
		}
		hdr = append(hdr, pad(t, cols[i].width, i == 0 || i == 1 || i == 3 || i == 9))
	}
	b.WriteString(m.st.Header.Render(strings.Join(hdr, " ")))
	b.WriteByte('\n')
	sel := max(0, min(m.selected, len(rows)-1))
	for i, n := range rows {
		s := n.stats
		state := n.displayState()
		// What only the node's samples tell is unknown, "-", while it is DOWN or silent.
		known := func(v string) string {
			if n.down || s == nil {
				return "-"
			}
			return v
		}
		cells := []string{
			pad(n.id, nameW, true),
			pad(state, 7, true),
			pad(known(heatmap.FormatRate(s.GetOpsPerSec())), 6, false),
		}
		if sparkW > 0 {
			cells = append(cells, m.st.Spark.Render(pad(sparkline(n.spark, sparkW), sparkW, true)))
		}
		errs := known(heatmap.FormatRate(n.errRate()))
		if n.errRate() > 0 && !n.down {
			errs = m.st.Down.Render(pad(errs, 5, false))
		}
		cells = append(cells,
			pad(known(fmtMs(p50(s))), 6, false),
			pad(known(fmtMs(s.GetP99Ms())), 6, false),
			pad(errs, 5, false),
			pad(known(present.Count(float64(s.GetKeys()))), 6, false),
			pad(known(present.BytesShort(float64(s.GetDiskBytes()))), 8, false),
			pad(known(present.BreakersShort(s.GetBreakers())), 7, true),
			pad(fmt.Sprintf("%.1f%%", n.share*100), 6, false),
		)
		switch {
		case state == "DOWN":
			cells[1] = m.st.Down.Render(cells[1])
		case state == "UP":
			cells[1] = m.st.Up.Render(cells[1])
		default:
			cells[1] = m.st.Warn.Render(cells[1])
		}
		line := strings.Join(cells, " ")
		if i == sel && m.view == ScreenOverview {
			line = m.st.Selected.Render(ansi.Strip(line))
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	if len(rows) == 0 {
		b.WriteString(m.st.Dim.Render("waiting for the cluster…") + "\n")
	}

	b.WriteByte('\n')
	alerts := m.alerts()
	b.WriteString(m.st.Header.Render("Alerts"))
	b.WriteByte('\n')
	if len(alerts) == 0 {
		b.WriteString(m.st.Dim.Render("none") + "\n")
	}
	for _, a := range alerts {
		b.WriteString(a + "\n")
	}
	used := strings.Count(b.String(), "\n")
	if left := h - used - 2; left > 0 {
		b.WriteByte('\n')
		if m.benchChart != "" && left >= minBenchChart {
			// The running bench's chart takes the events' place (they are in its markers).
			b.WriteString(m.st.Header.Render(fmt.Sprintf("Bench %d req/s", m.bench)))
			b.WriteByte('\n')
			b.WriteString(m.benchChart)
			return b.String()
		}
		b.WriteString(m.st.Header.Render("Events"))
		b.WriteByte('\n')
		b.WriteString(m.eventLines(left))
	}
	return b.String()
}

// minBenchChart is the fewest lines the overview draws the bench's chart in.
const minBenchChart = 12

// benchChartHeight is the lines the overview has for the bench's chart: the body less the
// node table, the alerts and the headers (as overviewView lays them out).
func (m Model) benchChartHeight() int {
	alerts := max(1, len(m.alerts()))
	return m.bodyHeight() - (1 + max(1, len(m.rows()))) - (2 + alerts) - 2
}

func sortTitle(s sortCol) string {
	return [...]string{"NODE", "OPS/S", "P99", "KEYS", "DISK", "SHARE"}[s]
}

// alerts names what needs an operator: nodes down, hot nodes, a change in flight.
func (m Model) alerts() []string {
	var out []string
	var sum float64
	up := 0
	for _, id := range m.sortedIDs() {
		n := m.nodes[id]
		if n.displayState() == "DOWN" {
			out = append(out, m.st.Down.Render("● node "+id+" is DOWN"))
			continue
		}
		sum += n.stats.GetOpsPerSec()
		up++
	}
	if up >= 2 && sum > 0 {
		mean := sum / float64(up)
		for _, id := range m.sortedIDs() {
			n := m.nodes[id]
			// A node's ops/s are the requests clients send it (it coordinates them), not what
			// its data attracts: the alert says so, and an idle cluster raises none.
			if ops := n.stats.GetOpsPerSec(); !n.down && ops > 1.5*mean && ops >= hotNodeMin {
				out = append(out, m.st.Warn.Render(fmt.Sprintf("▲ hot node %s: %s client ops/s, %.1f× the mean", id, heatmap.FormatRate(ops), ops/mean)))
			}
		}
	}
	for _, id := range m.sortedIDs() {
		if a := m.errorAlert(m.nodes[id]); a != "" {
			out = append(out, m.st.Down.Render(a))
		}
	}
	if a := m.hotVnodeAlert(); a != "" {
		out = append(out, m.st.Warn.Render(a))
	}
	if a := m.hotKeyAlert(); a != "" {
		out = append(out, m.st.Warn.Render(a))
	}
	if c := m.change; present.InFlight(c) {
		out = append(out, m.st.Warn.Render(fmt.Sprintf("⇄ change #%d in flight: %s, %s (%s)", c.GetId(), present.Change(c.GetPlan().GetRequest()), present.State(c.GetState()), strings.TrimSpace(pct(c.GetBytesDone(), c.GetBytesTotal())))))
		if p := present.Paused(c, m.opts.Now()); p != "" {
			out = append(out, m.st.Warn.Render("  "+p))
			if cost := present.PendingCost(c); cost != "" {
				out = append(out, m.st.Warn.Render("  "+cost+" · P resumes"))
			}
		}
		if st := present.StalledRanges(c); st != "" {
			out = append(out, m.st.Down.Render("✖ "+st))
		}
	}
	for _, r := range m.repairsInFlight() {
		done, total := present.RepairRanges(r)
		out = append(out, m.st.Warn.Render(fmt.Sprintf("⟳ repair #%d on %s in flight: %s, %s, ranges %d/%d (%s)", r.GetId(), r.GetCoordinator(),
			present.Repair(r.GetPlan().GetRequest()), present.RepairPhase(r), done, total, strings.TrimSpace(pct(uint64(done), uint64(total))))))
	}
	return out
}

// errorAlert names the errors a node answers with, by kind, "" when it answers none (or is
// DOWN: that has its own alert): "✖ node n2 answers 12 errors/s: unavailable 10, timeout 2".
func (m Model) errorAlert(n *node) string {
	if n.down || n.errRate() == 0 {
		return ""
	}
	kinds := make([]string, 0, len(n.errRates))
	for k := range n.errRates {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if n.errRates[kinds[i]] != n.errRates[kinds[j]] {
			return n.errRates[kinds[i]] > n.errRates[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = k + " " + heatmap.FormatRate(n.errRates[k])
	}
	return fmt.Sprintf("✖ node %s answers %s errors/s: %s", n.id, heatmap.FormatRate(n.errRate()), strings.Join(parts, ", "))
}

// Thresholds of the hot-vnode alert: the hottest vnode carries hotVnodeFactor times the mean
// vnode's load and at least hotVnodeMin ops/s.
const (
	hotVnodeFactor = 4
	hotVnodeMin    = 10
)

// hotNodeMin is the floor of the hot-node alert, in client ops/s: below it, 3× the mean of
// an idle cluster is noise.
const hotNodeMin = 10

// hotVnodeAlert names the hottest vnode when it stands out, "" otherwise.
func (m Model) hotVnodeAlert() string {
	var sum, top float64
	var hot heatmap.Cell
	n := 0
	for _, r := range m.heat.Rows() {
		for _, c := range r.Cells {
			v := c.Value(heatmap.Ops)
			sum += v
			n++
			if v > top {
				top, hot = v, c
			}
		}
	}
	if n == 0 || top < hotVnodeMin || top < hotVnodeFactor*sum/float64(n) {
		return ""
	}
	return fmt.Sprintf("▲ hot vnode %s of %s: %s ops/s over replicas, %.0f× the mean",
		present.TokenRangeShort(hot.Start, hot.End), hot.Node, heatmap.FormatRate(top), top/(sum/float64(n)))
}

func (m Model) eventLines(n int) string {
	if len(m.events) == 0 {
		return m.st.Dim.Render("none") + "\n"
	}
	ev := m.events
	if len(ev) > n {
		ev = ev[len(ev)-n:]
	}
	var b strings.Builder
	for _, e := range ev {
		t := m.st.Dim.Render(e.at.Format("15:04:05")) + " "
		if e.bad {
			b.WriteString(t + m.st.Down.Render(e.text))
		} else {
			b.WriteString(t + e.text)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (m Model) changesView(h int) string {
	var b strings.Builder
	c := m.change
	if present.NoChange(c) {
		b.WriteString(m.st.Dim.Render("no ring change in flight") + "\n")
	} else {
		b.WriteString(m.st.Header.Render(fmt.Sprintf("Change #%d: %s — %s", c.GetId(), present.Change(c.GetPlan().GetRequest()), present.State(c.GetState()))))
		b.WriteByte('\n')
		if p := present.Paused(c, m.opts.Now()); p != "" {
			b.WriteString(m.st.Warn.Render(p) + "\n")
			if cost := present.PendingCost(c); cost != "" {
				b.WriteString(m.st.Warn.Render(cost+" · P resumes") + "\n")
			}
		}
		if st := present.StalledRanges(c); st != "" {
			b.WriteString(m.st.Down.Render(ansi.Truncate(st, max(1, m.width), "…")) + "\n")
		}
		barW := max(10, min(40, m.width-44))
		// A paused change streams nothing; its ETA is the time it needs once resumed.
		rate := present.BytesShort(c.GetRateBytesPerSec()) + "/s"
		if present.OpenPause(c) != nil {
			rate = "paused"
		}
		b.WriteString(fmt.Sprintf("%-14s %s %s  %s  ETA %s\n", "total", m.bar(c.GetBytesDone(), c.GetBytesTotal(), barW),
			pct(c.GetBytesDone(), c.GetBytesTotal()), rate, present.ETA(c.GetEtaSeconds())))
		// Per node: what each receiver has taken in.
		type agg struct{ done, total uint64 }
		per := map[string]*agg{}
		var order []string
		for _, r := range c.GetRanges() {
			t := r.GetMove().GetTarget()
			if per[t] == nil {
				per[t] = &agg{}
				order = append(order, t)
			}
			per[t].done += r.GetBytesDone()
			per[t].total += r.GetMove().GetEstBytes()
		}
		for _, t := range order {
			a := per[t]
			b.WriteString(fmt.Sprintf("%-14s %s %s\n", "→ "+t, m.bar(a.done, a.total, barW), pct(a.done, a.total)))
		}
		// The pace of each node streaming, and why: what holds the clients' p99.
		for _, pc := range c.GetPaces() {
			line := present.Pace(pc)
			if r := pc.GetReason(); r == kvpb.PaceReason_PACE_REASON_BACKING_OFF || r == kvpb.PaceReason_PACE_REASON_AT_FLOOR || r == kvpb.PaceReason_PACE_REASON_HOLDING {
				line = m.st.Warn.Render(line)
			}
			b.WriteString(line + "\n")
		}
		b.WriteString(m.st.Header.Render("Ranges") + "\n")
		room := max(1, h/2-len(order)-3)
		for i, r := range c.GetRanges() {
			if i >= room {
				b.WriteString(m.st.Dim.Render(fmt.Sprintf("… %d more", len(c.GetRanges())-room)) + "\n")
				break
			}
			mv := r.GetMove()
			state := present.RangeState(r)
			if r.GetStall() != nil {
				state = m.st.Down.Render(state)
			}
			b.WriteString(fmt.Sprintf("%s %s→%s %s %s %s\n", present.TokenRangeShort(mv.GetStart(), mv.GetEnd()), mv.GetSource(), mv.GetTarget(),
				m.bar(r.GetBytesDone(), mv.GetEstBytes(), max(6, barW/2)), pct(r.GetBytesDone(), mv.GetEstBytes()), state))
		}
	}
	m.repairsView(&b)
	if !present.InFlight(c) {
		m.predictionView(&b)
	}
	b.WriteByte('\n')
	b.WriteString(m.st.Header.Render("Events") + "\n")
	used := strings.Count(b.String(), "\n")
	b.WriteString(m.eventLines(max(1, h-used)))
	return b.String()
}

// repairsView draws each repair in flight as the changes screen draws a ring change: a
// header, a bar of the ranges done with rate and ETA, what was streamed and compared, and a
// line per replica pair that differed.
func (m Model) repairsView(b *strings.Builder) {
	for _, r := range m.repairsInFlight() {
		b.WriteByte('\n')
		b.WriteString(m.st.Header.Render(fmt.Sprintf("Repair #%d on %s: %s — %s", r.GetId(), r.GetCoordinator(),
			present.Repair(r.GetPlan().GetRequest()), present.RepairPhase(r))))
		b.WriteByte('\n')
		barW := max(10, min(40, m.width-44))
		done, total := present.RepairRanges(r)
		b.WriteString(fmt.Sprintf("%-14s %s %s  %s/s  ETA %s\n", fmt.Sprintf("ranges %d/%d", done, total), m.bar(uint64(done), uint64(total), barW),
			pct(uint64(done), uint64(total)), present.BytesShort(r.GetRateBytesPerSec()), present.Duration(m.repairETA(r))))
		b.WriteString(m.st.Dim.Render(fmt.Sprintf("streamed %s keys, %s · compared %s keys", present.Count(float64(r.GetKeysStreamed())),
			present.BytesShort(float64(r.GetBytesStreamed())), present.Count(float64(r.GetKeysCompared())))) + "\n")
		if l := present.RepairPaused(r, m.statusAt); l != "" {
			b.WriteString(m.st.Warn.Render(l) + "\n")
		}
		if l := present.RepairContinued(r); l != "" {
			b.WriteString(m.st.Dim.Render(l) + "\n")
		}
		for _, pr := range r.GetPairs() {
			if pr.GetLeavesMismatched() == 0 {
				continue
			}
			l := fmt.Sprintf("%-14s %d of %d leaves differ", pr.GetA()+"/"+pr.GetB(), pr.GetLeavesMismatched(), pr.GetLeavesCompared())
			if k := pr.GetKeysToB(); k > 0 {
				l += fmt.Sprintf(", %d keys → %s", k, pr.GetB())
			}
			if k := pr.GetKeysToA(); k > 0 {
				l += fmt.Sprintf(", %d keys → %s", k, pr.GetA())
			}
			b.WriteString(l + "\n")
		}
	}
}

func (m Model) bar(done, total uint64, w int) string {
	f := 0.0
	if total > 0 {
		f = math.Min(1, float64(done)/float64(total))
	}
	n := int(math.Round(f * float64(w)))
	return m.st.BarFull.Render(strings.Repeat("█", n)) + m.st.BarEmpty.Render(strings.Repeat("░", w-n))
}

func pad(s string, w int, left bool) string {
	if lipgloss.Width(s) > w {
		return ansi.Truncate(s, w, "")
	}
	if left {
		return s + strings.Repeat(" ", w-lipgloss.Width(s))
	}
	return strings.Repeat(" ", w-lipgloss.Width(s)) + s
}

var sparkRunes = []rune("▁▂▃▄▅▆▇█")

// sparkline draws the last w samples, scaled to their maximum.
func sparkline(xs []float64, w int) string {
	if len(xs) > w {
		xs = xs[len(xs)-w:]
	}
	var top float64
	for _, x := range xs {
		top = max(top, x)
	}
	var b strings.Builder
	for _, x := range xs {
		i := 0
		if top > 0 {
			i = int(math.Round(x / top * float64(len(sparkRunes)-1)))
		}
		b.WriteRune(sparkRunes[max(0, min(i, len(sparkRunes)-1))])
	}
	return b.String()
}

// p50 is the node's coordinator p50, weighted by each op's rate; 0 (none) when the node has
// no p99 either (fewer than kvpb.MinLatencySamples ops).
func p50(s *kvpb.NodeStats) float64 {
	if s.GetP99Ms() <= 0 {
		return 0
	}
	var sum, w float64
	for _, o := range s.GetOps() {
		if o.GetRole() != kvpb.OpRole_OP_ROLE_COORDINATOR {
			continue
		}
		r := o.GetRate_1S()
		sum += o.GetP50Ms() * r
		w += r
	}
	if w == 0 {
		return 0
	}
	return sum / w
}

func fmtMs(ms float64) string {
	switch {
	case ms <= 0:
		return present.NoSamples
	case ms < 10:
		return fmt.Sprintf("%.2fms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0fms", ms)
	}
	return fmt.Sprintf("%.1fs", ms/1000)
}

func pct(done, total uint64) string {
	if total == 0 {
		return "  -  "
	}
	return fmt.Sprintf("%3.0f%%", math.Min(100, float64(done)*100/float64(total)))
}

// fullHelp lists every binding: four columns side by side when they fit, else two by two.
func (m Model) fullHelp() string {
	h := m.help
	h.SetWidth(0)
	groups := m.km.FullHelp()
	all := h.FullHelpView(groups)
	if lipgloss.Width(all) <= m.width {
		return all
	}
	return h.FullHelpView(groups[:2]) + "\n\n" + h.FullHelpView(groups[2:])
}
