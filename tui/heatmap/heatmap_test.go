package heatmap

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"ringkv/tui/keys"
	"ringkv/tui/styles"
)

// TestLegendAtZero: on an idle cluster every level's bound would read ">0"; the legend says
// once that every vnode is at 0, and keeps its scale when there is load.
func TestLegendAtZero(t *testing.T) {
	rows := func(ops float64) []Row {
		var r Row
		r.Node = "n1"
		for i := range 8 {
			r.Cells = append(r.Cells, Cell{Node: "n1", Start: uint64(i) << 60, End: uint64(i+1) << 60, Reads: ops * float64(i)})
		}
		return []Row{r}
	}
	tests := []struct {
		ops       float64
		want, not string
	}{
		{ops: 0, want: "every vnode is at 0 (no ops/s yet)", not: ">0"},
		{ops: 10, want: "hottest", not: "every vnode is at 0"},
	}
	for _, tt := range tests {
		m := New(styles.DefaultStyles(), keys.DefaultKeyMap())
		m.SetSize(80, 20)
		m.SetRows(rows(tt.ops))
		legend := ansi.Strip(strings.SplitN(m.View(), "\n", 2)[0])
		if !strings.Contains(legend, tt.want) || strings.Contains(legend, tt.not) {
			t.Errorf("ops %g: got legend %q, want %q and no %q", tt.ops, legend, tt.want, tt.not)
		}
	}
}

// TestTooNarrow: below MinWidth the heatmap is one line saying so, not wrapped garbage.
func TestTooNarrow(t *testing.T) {
	m := New(styles.DefaultStyles(), keys.DefaultKeyMap())
	m.SetSize(30, 20)
	m.SetRows([]Row{{Node: "n1", Cells: []Cell{{Node: "n1", End: 1 << 63, Reads: 5}}}})
	if got := ansi.Strip(m.View()); got != "widen to 40 columns (now 30)" {
		t.Errorf("got %q, want one line asking to widen to 40 columns", got)
	}
}

// TestLatencyWithoutSamples: a vnode with too few operations for a p99 is drawn "–" and its
// detail says "–", never 0.
func TestLatencyWithoutSamples(t *testing.T) {
	m := New(styles.DefaultStyles(), keys.DefaultKeyMap())
	m.SetSize(80, 20)
	m.SetMetric(ReadP99)
	m.SetCalls(true)
	m.SetRows([]Row{{Node: "n1", Cells: []Cell{{Node: "n1", End: 1 << 63, Reads: 5, Replicas: []string{"n1"}}}}})
	got := ansi.Strip(m.View())
	for _, want := range []string{"–<50 ops", "n1   ––", "replicas n1 · p99 read – write –"} {
		if !strings.Contains(got, want) {
			t.Errorf("got\n%s\nwant %q", got, want)
		}
	}
	if strings.Contains(got, "0µs") || strings.Contains(got, "0.0ms") {
		t.Errorf("got\n%s\nwant no zero latency", got)
	}
}
