package loadgen

import (
	"math"
	"strconv"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Phase is a part of a run between two events that change what the cluster does (a change
// begins, hands over, commits; a node goes down, comes back; a repair starts, ends). Its
// numbers are those of the whole seconds of its window: each measured second belongs to
// the phase in force at its middle, so the phase's latency is exactly the merge of its
// seconds' histograms.
type Phase struct {
	Name string
	// Start and End are the edges of the phase's first and last second.
	Start, End time.Time
	// Requests answered in the phase, Errors among them.
	Requests, Errors int64
	// Latency is the corrected latency of the phase's successful requests (ns).
	Latency *hdr.Histogram
}

// Rate is the phase's achieved rate in requests per second.
func (p Phase) Rate() float64 {
	if d := p.End.Sub(p.Start).Seconds(); d > 0 {
		return float64(p.Requests) / d
	}
	return 0
}

// SetEvents attaches the events of the run to r and cuts r.Intervals into r.Phases (the run
// must have kept its intervals: Config.KeepIntervals).
func (r *Result) SetEvents(events []Event) {
	r.Events = events
	r.Phases = CutPhases(r.Start, r.Intervals, events)
}

// CutPhases splits intervals (offsets from start) into phases by the events that cut one
// (Event.phaseName): a second belongs to the last cut at or before its middle, or to
// "before" when none is. A second without a request belongs to none. Names repeat with a
// number ("streaming 2") so that every phase of a run has its own.
func CutPhases(start time.Time, intervals []Interval, events []Event) []Phase {
	var cuts []Event
	for _, e := range events {
		if e.phaseName() != "" {
			cuts = append(cuts, e)
		}
	}
	var phases []Phase
	seen := map[string]int{}
	cur := -2 // the cut of the last phase; -1 = before the first cut
	for _, iv := range intervals {
		mid := start.Add((iv.Start + iv.End) / 2)
		c := -1
		for i, e := range cuts {
			if !e.At.After(mid) {
				c = i
			}
		}
		if c != cur {
			name := "before"
			if c >= 0 {
				name = cuts[c].phaseName()
			}
			if seen[name]++; seen[name] > 1 {
				name += " " + strconv.Itoa(seen[name])
			}
			phases = append(phases, Phase{Name: name, Start: start.Add(iv.Start), Latency: NewHistogram()})
			cur = c
		}
		p := &phases[len(phases)-1]
		p.End = start.Add(iv.End)
		p.Requests += iv.Requests
		p.Errors += iv.Errors
		if iv.Hist != nil {
			iv.Hist.MergeInto(p.Latency)
		}
	}
	return phases
}

// EventJSON is an Event in a Report: its time, its offset from the start of the measured
// run (negative in the warmup), its kind and its text.
type EventJSON struct {
	Time string  `json:"time"`
	AtS  float64 `json:"at_s"`
	Kind string  `json:"kind"`
	Node string  `json:"node,omitempty"`
	Text string  `json:"text"`
}

// PhaseJSON is a Phase in a Report: its window (times, and offsets from the start of the
// measured run), requests, errors, achieved rate and percentiles of the corrected latency.
type PhaseJSON struct {
	Name     string  `json:"name"`
	Start    string  `json:"start"`
	End      string  `json:"end"`
	StartS   float64 `json:"start_s"`
	EndS     float64 `json:"end_s"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	Rate     float64 `json:"rate"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	P999Ms   float64 `json:"p999_ms"`
	MaxMs    float64 `json:"max_ms"`
}

// SecondJSON is one measured second in a Report (what the chart draws): its end as an offset
// from the start of the measured run, requests, errors, rate and percentiles.
type SecondJSON struct {
	AtS      float64 `json:"at_s"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	Rate     float64 `json:"rate"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

const jsonTime = "2006-01-02T15:04:05.000Z07:00"

// eventsJSON, phasesJSON and secondsJSON fill a Report's events, phases and seconds, with
// offsets from measured (the end of the warmup).
func eventsJSON(measured time.Time, events []Event) []EventJSON {
	var out []EventJSON
	for _, e := range events {
		out = append(out, EventJSON{
			Time: e.At.UTC().Format(jsonTime), AtS: round3(e.At.Sub(measured).Seconds()),
			Kind: string(e.Kind), Node: e.Node, Text: e.Text,
		})
	}
	return out
}

func phasesJSON(measured time.Time, phases []Phase) []PhaseJSON {
	var out []PhaseJSON
	for _, p := range phases {
		out = append(out, PhaseJSON{
			Name: p.Name, Start: p.Start.UTC().Format(jsonTime), End: p.End.UTC().Format(jsonTime),
			StartS: round3(p.Start.Sub(measured).Seconds()), EndS: round3(p.End.Sub(measured).Seconds()),
			Requests: p.Requests, Errors: p.Errors, Rate: math.Round(p.Rate()*10) / 10,
			P50Ms: ms(float64(p.Latency.ValueAtPercentile(50))), P99Ms: ms(float64(p.Latency.ValueAtPercentile(99))),
			P999Ms: ms(float64(p.Latency.ValueAtPercentile(99.9))), MaxMs: ms(float64(p.Latency.Max())),
		})
	}
	return out
}

func secondsJSON(start, measured time.Time, intervals []Interval) []SecondJSON {
	var out []SecondJSON
	for _, iv := range intervals {
		out = append(out, SecondJSON{
			AtS: round3(start.Add(iv.End).Sub(measured).Seconds()), Requests: iv.Requests, Errors: iv.Errors,
			Rate: math.Round(iv.Rate*10) / 10, P50Ms: ms(float64(iv.P50)), P99Ms: ms(float64(iv.P99)), MaxMs: ms(float64(iv.Max)),
		})
	}
	return out
}
