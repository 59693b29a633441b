package loadgen

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/guptarohit/asciigraph"
)

// Chart geometry: the y-axis labels are formatted to a fixed width so that both plots, the
// x axis and the marker rows share one left edge (asciigraph puts data column x at
// chartOffset + chartLabel + x).
const (
	chartOffset = 3
	chartLabel  = 8
	chartLeft   = chartOffset + chartLabel
	// ChartMinWidth is the narrowest terminal Chart draws in.
	ChartMinWidth = chartLeft + 20
	chartP99Rows  = 8
	chartRateRows = 4
	// chartMarkerRows is how many rows of labels the markers may take before the rest are
	// listed below the chart.
	chartMarkerRows = 3
)

// Chart draws the run's p99 and achieved rate per second, one above the other on one time
// axis, and marks each event under it with a labelled arrow, all within width columns
// (at least ChartMinWidth). Plain text: no colour. Empty without at least two seconds.
func Chart(seconds []SecondJSON, events []EventJSON, width int) string {
	return chartRows(seconds, events, width, chartP99Rows, chartRateRows)
}

// ChartIn is Chart fitted to height lines too (at least 12): the plots share the rows left
// after the titles, the axis and the markers, two thirds to the p99.
func ChartIn(seconds []SecondJSON, events []EventJSON, width, height int) string {
	rows := max(height, 12) - 6 - 1 - chartMarkerRows - 2 // titles, axis, arrows, labels, plots' zero rows
	p99Rows := max(2, rows*2/3)
	return chartRows(seconds, events, width, p99Rows, max(1, rows-p99Rows))
}

func chartRows(seconds []SecondJSON, events []EventJSON, width, p99Rows, rateRows int) string {
	if len(seconds) < 2 {
		return ""
	}
	width = max(width, ChartMinWidth)
	plotW := width - chartLeft - 1
	x0, x1 := seconds[0].AtS-1, seconds[len(seconds)-1].AtS
	p99, rate := resample(seconds, x0, x1, plotW)
	axis := func(f string) asciigraph.Option {
		return asciigraph.YAxisValueFormatter(func(v float64) string { return fmt.Sprintf(f, v) })
	}
	var b strings.Builder
	b.WriteString("p99 (ms) per second\n")
	b.WriteString(overlay(asciigraph.Plot(p99, asciigraph.Height(p99Rows),
		asciigraph.LowerBound(0), asciigraph.Offset(chartOffset), axis("%8.1f")), events, x0, x1, plotW))
	b.WriteString("\nrate (req/s) per second\n")
	b.WriteString(overlay(asciigraph.Plot(rate, asciigraph.Height(rateRows),
		asciigraph.LowerBound(0), asciigraph.Offset(chartOffset), axis("%8.0f"),
		asciigraph.XAxisRange(x0, x1), asciigraph.XAxisTickCount(min(6, max(2, plotW/12))),
		asciigraph.XAxisValueFormatter(func(v float64) string { return fmt.Sprintf("%gs", math.Round(v*10)/10) })), events, x0, x1, plotW))
	b.WriteByte('\n')
	b.WriteString(markers(events, x0, x1, plotW, width))
	return b.String()
}

// column maps a time (seconds from the start of the measured run) to a column of the plot,
// which spans (x0, x1].
func column(at, x0, x1 float64, plotW int) int {
	if x1 <= x0 {
		return 0
	}
	c := int(math.Floor((at - x0) / (x1 - x0) * float64(plotW)))
	return min(max(c, 0), plotW-1)
}

// resample gives each of plotW columns the worst p99 and the mean rate of the seconds it
// overlaps: a spike of one second survives however many seconds share a column, and a
// second spans several columns when there are fewer seconds than columns.
func resample(seconds []SecondJSON, x0, x1 float64, plotW int) (p99, rate []float64) {
	p99, rate = make([]float64, plotW), make([]float64, plotW)
	step := (x1 - x0) / float64(plotW)
	for j := range plotW {
		lo, hi := x0+float64(j)*step, x0+float64(j+1)*step
		n := 0
		from := x0
		for _, s := range seconds {
			if s.AtS > lo && from < hi {
				p99[j] = max(p99[j], s.P99Ms)
				rate[j] += s.Rate
				n++
			}
			from = s.AtS
		}
		if n > 0 {
			rate[j] /= float64(n)
		}
	}
	return p99, rate
}

// overlay draws a dotted vertical line at each event's column through the plot's rows,
// where the plot has nothing to draw (x-axis rows are left as they are).
func overlay(plot string, events []EventJSON, x0, x1 float64, plotW int) string {
	lines := strings.Split(plot, "\n")
	for i, l := range lines {
		r := []rune(l)
		if !strings.ContainsAny(l, "┤┼") {
			continue // the x axis and its labels
		}
		for len(r) < chartLeft+plotW {
			r = append(r, ' ')
		}
		for _, e := range events {
			if c := chartLeft + column(e.AtS, x0, x1, plotW); r[c] == ' ' {
				r[c] = '┊'
			}
		}
		lines[i] = strings.TrimRight(string(r), " ")
	}
	return strings.Join(lines, "\n")
}

// markers draws a row of arrows under the events' columns and their labels on the rows
// below, each as far left as its arrow, on the first row where it does not touch another;
// labels that find no room are listed after.
func markers(events []EventJSON, x0, x1 float64, plotW, width int) string {
	if len(events) == 0 {
		return ""
	}
	arrows := []rune(strings.Repeat(" ", chartLeft+plotW))
	rows := make([][]rune, chartMarkerRows)
	for i := range rows {
		rows[i] = []rune(strings.Repeat(" ", width))
	}
	var rest []string
	for _, e := range events {
		c := chartLeft + column(e.AtS, x0, x1, plotW)
		arrows[c] = '▲'
		label := fmt.Sprintf("%s %.0fs", EventJSONMarker(e), e.AtS)
		n := len([]rune(label))
		placed := false
		for _, row := range rows {
			start := min(c, width-n)
			if start < 0 || !free(row, start-1, start+n+1) {
				continue
			}
			copy(row[start:], []rune(label))
			placed = true
			break
		}
		if !placed {
			rest = append(rest, label)
		}
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(string(arrows), " "))
	for _, row := range rows {
		if s := strings.TrimRight(string(row), " "); s != "" {
			b.WriteString("\n" + s)
		}
	}
	if len(rest) > 0 {
		b.WriteString("\n" + truncate("also: "+strings.Join(rest, ", "), width))
	}
	b.WriteByte('\n')
	return b.String()
}

// free tells whether row[from:to] (clipped to the row) is blank.
func free(row []rune, from, to int) bool {
	for i := max(from, 0); i < min(to, len(row)); i++ {
		if row[i] != ' ' {
			return false
		}
	}
	return true
}

func truncate(s string, width int) string {
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return string(r[:width-1]) + "…"
}

// EventJSONMarker is the chart label of a reported event (Event.Marker).
func EventJSONMarker(e EventJSON) string {
	return Event{Kind: EventKind(e.Kind), Node: e.Node}.Marker()
}

// WriteSeries writes the seconds as plain lines, the chart's data for a reader that is not
// a terminal: "at_s rate p99_ms errors [events]", tab-separated, each event on the line of
// the second it happened in.
func WriteSeries(w io.Writer, seconds []SecondJSON, events []EventJSON) error {
	ew := &errWriter{w: w}
	ew.printf("at_s\trate\tp99_ms\terrors\tevents\n")
	evs := slices.Clone(events)
	for _, s := range seconds {
		var here []string
		for len(evs) > 0 && evs[0].AtS <= s.AtS {
			here = append(here, EventJSONMarker(evs[0]))
			evs = evs[1:]
		}
		ew.printf("%.1f\t%.1f\t%.3f\t%d\t%s\n", s.AtS, s.Rate, s.P99Ms, s.Errors, strings.Join(here, ", "))
	}
	return ew.err
}
