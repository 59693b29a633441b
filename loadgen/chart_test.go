package loadgen

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"
)

// chartRun is a made-up 30-second run: a ring add streams from 8 s, hands over at 17 s and
// commits at 17.4 s; p99 climbs while it streams and spikes at the hand-over; a node is
// lost for three seconds after it.
func chartRun() ([]SecondJSON, []EventJSON) {
	var secs []SecondJSON
	for i := range 30 {
		s := SecondJSON{AtS: float64(i + 1), Requests: 1000, Rate: 1000, P99Ms: 4 + float64(i%3)}
		switch {
		case i >= 8 && i < 17:
			s.P99Ms = 12 + float64(i-8)
		case i == 17:
			s.P99Ms, s.Rate = 85, 930
		case i >= 22 && i < 25:
			s.P99Ms, s.Rate, s.Errors = 40, 760, 240
		}
		secs = append(secs, s)
	}
	evs := []EventJSON{
		{AtS: 8.1, Kind: "change-begin", Node: "n4", Text: "add n4"},
		{AtS: 8.3, Kind: "first-chunk", Node: "n4", Text: "add n4: first records streamed"},
		{AtS: 17.0, Kind: "hand-over", Node: "n4", Text: "add n4: handing over"},
		{AtS: 17.4, Kind: "commit", Node: "n4", Text: "add n4 committed: epoch 2"},
		{AtS: 22.2, Kind: "node-down", Node: "n2", Text: "n2 DOWN"},
		{AtS: 25.1, Kind: "node-up", Node: "n2", Text: "n2 UP"},
	}
	return secs, evs
}

// TestChart: the chart of a run fits the width asked (80 and 120 columns), with the p99 and
// rate plots on one time axis and every event marked and labelled.
func TestChart(t *testing.T) {
	secs, evs := chartRun()
	for _, w := range []int{80, 120} {
		t.Run(map[int]string{80: "80", 120: "120"}[w], func(t *testing.T) {
			out := Chart(secs, evs, w)
			for i, l := range strings.Split(out, "\n") {
				if n := len([]rune(l)); n > w {
					t.Errorf("line %d is %d columns, want <= %d: %q", i, n, w, l)
				}
			}
			for _, want := range []string{"begin 8s", "commit 17s", "n2 down 22s", "n2 up 25s", "▲", "┊"} {
				if !strings.Contains(out, want) {
					t.Errorf("chart lacks %q", want)
				}
			}
			golden.RequireEqual(t, []byte(out))
		})
	}
	if got := Chart(secs[:1], evs, 80); got != "" {
		t.Errorf("chart of one second = %q, want none", got)
	}
}

// TestWriteSeries: the plain series has a line per second with the events of that second.
func TestWriteSeries(t *testing.T) {
	secs, evs := chartRun()
	var buf bytes.Buffer
	if err := WriteSeries(&buf, secs, evs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(secs)+1 {
		t.Fatalf("%d lines, want %d", len(lines), len(secs)+1)
	}
	if got, want := lines[9], "9.0\t1000.0\t12.000\t0\tbegin, 1st chunk"; got != want {
		t.Errorf("line of the 9th second = %q, want %q", got, want)
	}
}

// TestLiveChart: a run through Live can be drawn while it runs, within the size asked.
func TestLiveChart(t *testing.T) {
	tgt := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), 2)
	cfg := DefaultConfig()
	cfg.Rate, cfg.Duration, cfg.Warmup, cfg.Connections = 200, 10*time.Second, 0, 2
	live := &Live{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = live.Run(ctx, cfg, tgt, nil)
	}()
	defer func() { cancel(); <-done }()
	var chart string
	for deadline := time.Now().Add(8 * time.Second); chart == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		chart = live.Chart(70, 16)
	}
	if !strings.Contains(chart, "rate (req/s) per second") {
		t.Fatalf("no live chart after 8 s: %q", chart)
	}
	lines := strings.Split(strings.TrimRight(chart, "\n"), "\n")
	if len(lines) > 16 {
		t.Errorf("live chart of %d lines, want <= 16:\n%s", len(lines), chart)
	}
	for _, l := range lines {
		if n := len([]rune(l)); n > 70 {
			t.Errorf("line of %d columns, want <= 70: %q", n, l)
		}
	}
}
