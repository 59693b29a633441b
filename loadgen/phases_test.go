package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// TestPhasesAreTheirSeconds: a run cut by a change's begin and commit has the phases before,
// streaming and after, and each phase's requests, errors and percentiles are exactly those of
// the merged histograms of the seconds in its window; every measured second is in one phase.
// The server answers slower in the middle of the run, so the phases differ.
func TestPhasesAreTheirSeconds(t *testing.T) {
	var slow atomic.Bool
	tgt := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			time.Sleep(2 * time.Millisecond)
		}
	}), 4)
	cfg := DefaultConfig()
	cfg.Rate, cfg.Duration, cfg.Warmup, cfg.Connections = 400, 5*time.Second, 500*time.Millisecond, 4
	cfg.KeepIntervals = true
	var start time.Time
	var seconds atomic.Int64
	cfg.OnInterval = func(iv Interval) {
		// The server slows down for the middle seconds of the run.
		switch seconds.Add(1) {
		case 2:
			slow.Store(true)
		case 4:
			slow.Store(false)
		}
	}
	r, err := Run(context.Background(), cfg, tgt)
	if err != nil {
		t.Fatal(err)
	}
	start = r.Start
	measured := start.Add(cfg.Warmup)
	events := []Event{
		{At: measured.Add(1500 * time.Millisecond), Kind: EventChangeBegin, Node: "n4", Text: "add n4"},
		{At: measured.Add(2200 * time.Millisecond), Kind: EventFirstChunk, Node: "n4", Text: "add n4: first records streamed"},
		{At: measured.Add(3400 * time.Millisecond), Kind: EventCommit, Node: "n4", Text: "add n4 committed: epoch 2"},
	}
	r.SetEvents(events)

	var names []string
	for _, p := range r.Phases {
		names = append(names, p.Name)
	}
	if got, want := strings.Join(names, ","), "before,streaming,after"; got != want {
		t.Fatalf("phases %s, want %s (intervals %d)", got, want, len(r.Intervals))
	}
	var inPhases, total int64
	for _, p := range r.Phases {
		merged := NewHistogram()
		var reqs, errs int64
		for _, iv := range r.Intervals {
			mid := start.Add((iv.Start + iv.End) / 2)
			if mid.Before(p.Start) || !mid.Before(p.End) {
				continue
			}
			reqs += iv.Requests
			errs += iv.Errors
			if iv.Hist != nil {
				iv.Hist.MergeInto(merged)
			}
		}
		if reqs != p.Requests || errs != p.Errors {
			t.Errorf("%s: requests %d errors %d, want %d and %d (its seconds')", p.Name, p.Requests, p.Errors, reqs, errs)
		}
		for _, q := range []float64{50, 99, 99.9, 100} {
			if got, want := p.Latency.ValueAtPercentile(q), merged.ValueAtPercentile(q); got != want {
				t.Errorf("%s: p%g = %d, want %d (the merged seconds')", p.Name, q, got, want)
			}
		}
		if p.Latency.TotalCount() == 0 {
			t.Errorf("%s: no latency recorded", p.Name)
		}
		inPhases += p.Requests
	}
	for _, iv := range r.Intervals {
		total += iv.Requests
	}
	if inPhases != total {
		t.Errorf("phases hold %d requests, the seconds %d", inPhases, total)
	}

	t.Run("json", func(t *testing.T) {
		b, err := json.Marshal(r.Report("http test"))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := ReadReport(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Events) != 3 || rep.Events[0].Kind != string(EventChangeBegin) || rep.Events[0].AtS != 1.5 {
			t.Errorf("events %+v, want 3, the first change-begin at 1.5 s", rep.Events)
		}
		if len(rep.Phases) != 3 {
			t.Fatalf("phases %+v, want 3", rep.Phases)
		}
		for i, p := range rep.Phases {
			if want := ms(float64(r.Phases[i].Latency.ValueAtPercentile(99))); p.P99Ms != want || p.P99Ms <= 0 {
				t.Errorf("phase %s p99_ms %g, want %g (> 0)", p.Name, p.P99Ms, want)
			}
			if p.EndS <= p.StartS {
				t.Errorf("phase %s window %g..%g s", p.Name, p.StartS, p.EndS)
			}
		}
		if len(rep.Seconds) != len(r.Intervals) {
			t.Errorf("seconds %d, want %d", len(rep.Seconds), len(r.Intervals))
		}
	})

	t.Run("hlog", func(t *testing.T) {
		var buf bytes.Buffer
		if err := WriteHlog(&buf, r); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(buf.String(), "#[Event: "); got != len(events) {
			t.Errorf("hlog has %d event comments, want %d:\n%s", got, len(events), buf.String())
		}
		rd := hdr.NewHistogramLogReader(&buf)
		n := 0
		for {
			h, err := rd.NextIntervalHistogram()
			if err != nil {
				t.Fatalf("the log with events does not read back: %v", err)
			}
			if h == nil {
				break
			}
			n++
		}
		if n != len(r.Intervals) {
			t.Errorf("read %d histograms back, want %d", n, len(r.Intervals))
		}
	})

	t.Run("summary", func(t *testing.T) {
		var buf bytes.Buffer
		if err := WriteSummary(&buf, r, SummaryOptions{Target: "test"}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Phases:", "streaming", "change-begin", "commit"} {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("summary lacks %q:\n%s", want, buf.String())
			}
		}
	})
}

// TestPhaseNamesRepeat: a second streaming phase (a pause and its resume) gets a number, a
// node's loss and return name the node, and marker-only events cut nothing.
func TestPhaseNamesRepeat(t *testing.T) {
	start := time.Unix(1000, 0)
	var ivs []Interval
	for i := range 10 {
		ivs = append(ivs, Interval{Start: time.Duration(i) * time.Second, End: time.Duration(i+1) * time.Second, Requests: 10})
	}
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	events := []Event{
		{At: at(1), Kind: EventChangeBegin},
		{At: at(2), Kind: EventRate},
		{At: at(3), Kind: EventPause},
		{At: at(4), Kind: EventResume},
		{At: at(6.2), Kind: EventNodeDown, Node: "n2"},
		{At: at(8), Kind: EventNodeUp, Node: "n2"},
	}
	var got []string
	for _, p := range CutPhases(start, ivs, events) {
		got = append(got, p.Name)
	}
	if want := "before,streaming,paused,streaming 2,n2 down,n2 back up"; strings.Join(got, ",") != want {
		t.Errorf("phases %s, want %s", strings.Join(got, ","), want)
	}
}
