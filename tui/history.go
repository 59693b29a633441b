package tui

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"ringkv/ctl/oncall"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// A zoom of the history view: how much time it shows and at what step (the tier kept for it).
type zoom struct {
	name       string
	span, step time.Duration
}

var zooms = []zoom{{"1h", time.Hour, 10 * time.Second}, {"24h", 24 * time.Hour, time.Minute}, {"7d", 7 * 24 * time.Hour, 10 * time.Minute}}

// maxHistory is how far back the nodes keep their history.
const maxHistory = 7 * 24 * time.Hour

// historyRows is the number of rows of the heat table (16 buckets each).
const historyRows = 16

// history is the history view's state: the same picture as kvctl heat, a window of zoom's
// span that ends offset half-spans before now, a selected row, and the last answer.
type history struct {
	zoom   int
	offset int
	row    int
	seq    int // of the last request; older answers are dropped
	res    *oncall.Heat
	err    error
	asked  bool      // read once: the view keeps reading every historyPoll while shown
	at     time.Time // when it was last asked for
}

// HeatMsg carries the heat of every node that answered request Seq.
type HeatMsg struct {
	Seq  int
	Resp []*kvpb.HeatResponse
	Err  error
}

// window is the time the view shows, [from, to).
func (h history) window(now time.Time) (from, to time.Time) {
	z := zooms[h.zoom]
	to = now.Add(-time.Duration(h.offset) * z.span / 2)
	return to.Add(-z.span), to
}

// maxOffset is the furthest back the view scrolls: its window's start at the history's end.
func (h history) maxOffset() int {
	z := zooms[h.zoom]
	return int((maxHistory - z.span) / (z.span / 2))
}

// fetchHeat asks every node for the history of the view's window (a scrolled window at the
// finest step that reaches its start).
func (m *Model) fetchHeat() tea.Cmd {
	oc := m.onCall()
	if oc == nil {
		return nil
	}
	m.hist.seq++
	m.hist.asked, m.hist.at = true, m.opts.Now()
	seq := m.hist.seq
	from, _ := m.hist.window(m.opts.Now())
	req := &kvpb.HeatRequest{SinceUnixNanos: from.UnixNano(), Metric: kvpb.HeatMetric_HEAT_METRIC_OPS}
	if m.hist.offset == 0 {
		req.StepSeconds = uint32(zooms[m.hist.zoom].step / time.Second)
	}
	return rpc(DefaultRPCTimeout, func(ctx context.Context) tea.Msg {
		r, err := oc.Heat(ctx, req)
		return HeatMsg{Seq: seq, Resp: r, Err: err}
	})
}

// onHeat keeps the answer to the last request, cut to the view's window.
func (m *Model) onHeat(msg HeatMsg) {
	if msg.Seq != m.hist.seq {
		return
	}
	m.hist.res, m.hist.err = nil, msg.Err
	if msg.Err != nil {
		return
	}
	res, err := oncall.MergeHeat(msg.Resp, "ops")
	if err != nil {
		m.hist.err = err
		return
	}
	from, to := m.hist.window(m.opts.Now())
	m.hist.res = res.Window(from, to)
}

// onHistoryKey moves the row, scrolls and zooms; a scroll or zoom asks for the heat again.
func (m Model) onHistoryKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	h := &m.hist
	switch {
	case key.Matches(k, m.km.Up):
		h.row = max(0, h.row-1)
		return m, nil
	case key.Matches(k, m.km.Down):
		h.row = min(historyRows-1, h.row+1)
		return m, nil
	case key.Matches(k, m.km.Left):
		if h.offset == h.maxOffset() {
			return m, nil
		}
		h.offset++
	case key.Matches(k, m.km.Right):
		if h.offset == 0 {
			return m, nil
		}
		h.offset--
	case key.Matches(k, m.km.Zoom):
		h.zoom = (h.zoom + 1) % len(zooms)
		h.offset = min(h.offset, h.maxOffset())
	default:
		return m, nil
	}
	return m, m.fetchHeat()
}

// historyView draws the history: the heat table as kvctl heat draws it (the selected row
// marked), the selected row's detail, then the events that fit.
func (m Model) historyView(h int) string {
	if m.onCall() == nil {
		return m.st.Dim.Render("this console's source keeps no history")
	}
	if m.width < oncall.HeatMinWidth {
		return m.st.Down.Render(fmt.Sprintf("widen to %d columns (now %d)", oncall.HeatMinWidth, m.width))
	}
	z := zooms[m.hist.zoom]
	from, to := m.hist.window(m.opts.Now())
	when := "now"
	if m.hist.offset > 0 {
		when = to.Local().Format("01-02 15:04")
	}
	head := m.st.Header.Render("History") + m.st.Dim.Render(fmt.Sprintf(" %s to %s", z.name, when))
	switch {
	case m.hist.err != nil && errors.Is(m.hist.err, oncall.ErrNoData):
		return head + "\n" + m.st.Warn.Render(fmt.Sprintf("no data from %s to %s: no node has history for this window", from.Local().Format("01-02 15:04"), when))
	case m.hist.err != nil:
		return head + "\n" + m.st.Down.Render(m.hist.err.Error())
	case m.hist.res == nil:
		return head + "\n" + m.st.Dim.Render("reading the nodes' history…")
	}
	var sb strings.Builder
	if err := oncall.DrawHeat(&sb, m.hist.res, m.width); err != nil {
		return head + "\n" + m.st.Down.Render(err.Error())
	}
	lines := strings.Split(strings.TrimRight(sb.String(), "\n"), "\n")
	// lines: the table's title (the head says it), 16 rows, the event marks and times, the
	// legend, the events.
	const table = 1 + historyRows + 2 + 1
	if len(lines) < table {
		return head + "\n" + sb.String()
	}
	var b strings.Builder
	b.WriteString(head + m.st.Dim.Render(" · "+lines[0]) + "\n")
	rows := lines[1:table]
	if h < table+2 { // no room for the legend besides the owner and detail lines
		rows = rows[:len(rows)-1]
	}
	for i, l := range rows {
		if i == m.hist.row {
			l = m.st.Selected.Render(l)
		}
		b.WriteString(l + "\n")
		if i == historyRows-1 {
			b.WriteString(m.ownerLine() + "\n") // under the rows, on their time axis
		}
	}
	b.WriteString(m.rowDetail() + "\n")
	if room := h - table - 2; room > 0 {
		evs := lines[table:]
		if len(evs) > room {
			evs = evs[len(evs)-room:]
		}
		for _, l := range evs {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// rowBuckets are the buckets of the selected row.
func (h history) rowBuckets() (lo, hi int) { return h.row * historyRows, (h.row+1)*historyRows - 1 }

// ownerLine draws the selected row's owner along the time axis, a glyph per drawn column
// (the columns kvctl heat's table draws, adjacent steps merged as it merges them): the owner
// at the column's end, highlighted where ownership changed; "-" where no node knows.
func (m Model) ownerLine() string {
	res := m.hist.res
	owners, changed := res.RowOwners(m.hist.rowBuckets())
	ncols := len(owners)
	group := max(1, (ncols+m.width-oncall.HeatLabelWidth-1)/max(1, m.width-oncall.HeatLabelWidth))
	glyphs := ownerGlyphs(owners)
	var b strings.Builder
	b.WriteString(fmt.Sprintf("%-*s", oncall.HeatLabelWidth, "owner"))
	for c := 0; c < ncols; c += group {
		end := min(c+group, ncols)
		o, ch := owners[end-1], slices.Contains(changed[c:end], true)
		g := "-"
		if o != "" {
			g = glyphs[o]
		}
		if ch {
			g = m.st.Warn.Reverse(true).Render(g)
		}
		b.WriteString(g)
	}
	return b.String()
}

// ownerGlyphs gives each owner one character: the last of its id when those differ (n1 → 1),
// else a letter by id order.
func ownerGlyphs(owners []string) map[string]string {
	ids := map[string]bool{}
	for _, o := range owners {
		if o != "" {
			ids[o] = true
		}
	}
	sorted := slices.Sorted(maps.Keys(ids))
	out := map[string]string{}
	last := map[string]bool{}
	for _, id := range sorted {
		r := []rune(id)
		g := string(r[len(r)-1])
		if last[g] {
			out = map[string]string{}
			for i, id := range sorted {
				out[id] = string(rune('A' + i%26))
			}
			return out
		}
		last[g], out[id] = true, g
	}
	return out
}

// ownerDetail says who owns the selected row at the window's end and when it last changed
// hands: "owner n3 (1 → 3), since 14:32:10, before n2".
func (m Model) ownerDetail() string {
	owners, changed := m.hist.res.RowOwners(m.hist.rowBuckets())
	now := ""
	for i := len(owners) - 1; i >= 0 && now == ""; i-- {
		now = owners[i]
	}
	if now == "" {
		return ""
	}
	glyphs := ownerGlyphs(owners)
	var legend []string
	for _, id := range slices.Sorted(maps.Keys(glyphs)) {
		if glyphs[id] != id[len(id)-1:] {
			legend = append(legend, glyphs[id]+"="+id)
		}
	}
	s := " owner " + now
	for c := len(changed) - 1; c > 0; c-- {
		if changed[c] {
			at := m.hist.res.Columns[c].Local().Format("15:04:05")
			switch before := owners[c-1]; {
			case before == owners[c]: // the row's majority held; some of its buckets moved
				s += fmt.Sprintf(", part of the row changed hands at %s", at)
			case before == "" || before == "-":
				s += fmt.Sprintf(" since %s", at)
			default:
				s += fmt.Sprintf(" since %s (was %s)", at, before)
			}
			break
		}
	}
	if len(legend) > 0 {
		s += " [" + strings.Join(legend, " ") + "]"
	}
	return s
}

// rowDetail is the selected row's detail: its buckets (a token's top byte), the window's
// total, its peak step and last step, and the steps no node saw.
func (m Model) rowDetail() string {
	res := m.hist.res
	lo, hi := m.hist.rowBuckets()
	var total, peak, last uint64
	var peakAt time.Time
	missing := 0
	for c := range res.Columns {
		var v uint64
		seen := false
		for b := lo; b <= hi; b++ {
			if p := res.Values[b][c]; p != nil {
				v += *p
				seen = true
			}
		}
		if !seen {
			missing++
			continue
		}
		total += v
		last = v
		if v > peak {
			peak, peakAt = v, res.Columns[c]
		}
	}
	step := present.Duration(time.Duration(res.StepSeconds) * time.Second)
	s := fmt.Sprintf("0x%02x-0x%02x%s: %s ops", lo, hi, m.ownerDetail(), present.Count(float64(total)))
	if peak > 0 {
		s += fmt.Sprintf(" · peak %s/%s at %s · last %s", present.Count(float64(peak)), step, peakAt.Local().Format("15:04:05"), present.Count(float64(last)))
	}
	if missing > 0 {
		s += fmt.Sprintf(" · %d steps no data", missing)
	}
	return m.st.Header.Render("row") + " " + s
}
