package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Ladder returns the percentile ladder of the summary (percent, 0–100).
func Ladder() []float64 { return []float64{50, 75, 90, 99, 99.9, 99.99, 99.999, 100} }

// Result is what one Run measured, warmup excluded. Histograms hold nanoseconds.
type Result struct {
	Config Config
	Start  time.Time
	// Elapsed is the measured wall time: from the end of warmup until the last answer.
	Elapsed time.Duration
	// Requests answered in the measured part (errors included); NotFound among them.
	Requests, NotFound int64
	// Achieved is Requests / Elapsed. A generator that ends behind schedule leaves requests
	// unsent (Unsent), which lowers it.
	Achieved float64
	// Errors counts the errors by kind.
	Errors map[Kind]int64
	// Corrected latency runs from each request's intended start (coordinated omission
	// corrected); Uncorrected from its actual send; SendLag is actual send - intended start.
	Corrected, Uncorrected, SendLag *hdr.Histogram
	// Breakdown has one entry per operation and class (see Config.Classify), sorted.
	Breakdown []Breakdown
	// Intervals has one entry per measured second when Config.KeepIntervals is set.
	Intervals []Interval
	// CPU is the generator's own CPU use over the whole run.
	CPU CPU
	// FinalLag is how far behind its schedule the generator ended (median over connections).
	FinalLag time.Duration
	// Unsent counts the requests of the schedule (warmup included) that the generator had not
	// sent when the run ended: it stops at the end even when behind.
	Unsent int64
	// Invalid is set when the generator could not keep its schedule; InvalidReason says why.
	Invalid       bool
	InvalidReason string
	// Interrupted is set when ctx ended the run early.
	Interrupted bool
	// Events are what happened in the cluster during the run (SetEvents), oldest first;
	// Phases cut the measured seconds by them.
	Events []Event
	Phases []Phase
}

// Breakdown is the share of a result of one operation and class.
type Breakdown struct {
	Op, Class          string
	Requests, NotFound int64
	Errors             map[Kind]int64
	Latency            *hdr.Histogram
}

// ErrorCount is the number of errors of every kind.
func (r *Result) ErrorCount() int64 { return sumErrors(r.Errors) }

// Successes is the number of requests answered without error (not found included): the
// requests the latency histograms hold.
func (r *Result) Successes() int64 { return r.Requests - r.ErrorCount() }

// SuccessRatio is Successes / Requests, 0 when nothing was answered.
func (r *Result) SuccessRatio() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Successes()) / float64(r.Requests)
}

// errorsByKind lists the error counts by kind: "connection 98, timeout 2".
func errorsByKind(m map[Kind]int64) string {
	var parts []string
	for _, k := range ErrorKinds() {
		if v := m[k]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

// Line is r in one line, for a log or a dialog: "2400 requests in 4.8s (500/s), 99.96% ok,
// p50 400.00us, p99 2.10ms; errors: timeout 1".
func (r *Result) Line() string {
	s := fmt.Sprintf("%d requests in %.1fs (%.0f/s), %.2f%% ok", r.Requests, r.Elapsed.Seconds(), r.Achieved, 100*r.SuccessRatio())
	if r.Corrected.TotalCount() > 0 {
		s += fmt.Sprintf(", p50 %s, p99 %s", fmtDur(time.Duration(r.Corrected.ValueAtPercentile(50))),
			fmtDur(time.Duration(r.Corrected.ValueAtPercentile(99))))
	}
	if r.ErrorCount() > 0 {
		s += "; errors: " + errorsByKind(r.Errors)
	}
	return s
}

// tooManyErrors tells whether more requests failed than Config.MaxErrors allows (or none
// was answered), and says so.
func (r *Result) tooManyErrors() (bool, string) {
	if r.Requests == 0 {
		return true, "no request was answered"
	}
	failed := r.ErrorCount()
	if float64(failed) <= r.Config.MaxErrors*float64(r.Requests) {
		return false, ""
	}
	return true, fmt.Sprintf("%d of %d requests failed (%.1f%%, max %.1f%%): %s",
		failed, r.Requests, 100*float64(failed)/float64(r.Requests), 100*r.Config.MaxErrors, errorsByKind(r.Errors))
}

func sumErrors(m map[Kind]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// Holds tells whether the result meets every objective of slo, and if not, which one failed.
func (r *Result) Holds(slo SLO) (bool, string) {
	for _, o := range slo {
		if got := time.Duration(r.Corrected.ValueAtPercentile(o.Percentile)); got > o.Max {
			return false, fmt.Sprintf("%s %s > %s", percentileName(o.Percentile), fmtDur(got), fmtDur(o.Max))
		}
	}
	return true, ""
}

// Report is the stable JSON form of a Result (kvctl bench --json, bench diff).
type Report struct {
	Target          string           `json:"target"`
	Workload        string           `json:"workload"`
	KeyDist         string           `json:"key_dist"`
	Keys            int64            `json:"keys"`
	ValueSize       string           `json:"value_size"`
	Connections     int              `json:"connections"`
	RateAsked       float64          `json:"rate_asked"`
	RateAchieved    float64          `json:"rate_achieved"`
	DurationSeconds float64          `json:"duration_seconds"`
	Requests        int64            `json:"requests"`
	Successes       int64            `json:"successes"`
	SuccessRatio    float64          `json:"success_ratio"`
	NotFound        int64            `json:"not_found"`
	Errors          map[string]int64 `json:"errors"`
	Latency         Latency          `json:"latency"`
	Uncorrected     Latency          `json:"uncorrected"`
	SendLag         Latency          `json:"send_lag"`
	CPU             CPUReport        `json:"generator_cpu"`
	Unsent          int64            `json:"unsent"`
	Invalid         bool             `json:"invalid"`
	InvalidReason   string           `json:"invalid_reason,omitempty"`
	Interrupted     bool             `json:"interrupted,omitempty"`
	Breakdown       []BreakdownJSON  `json:"breakdown,omitempty"`
	// Events and Phases are set when the run followed the cluster (kvctl bench --events):
	// what happened and the run cut by it; Seconds when it kept its seconds (the chart's).
	Events  []EventJSON  `json:"events,omitempty"`
	Phases  []PhaseJSON  `json:"phases,omitempty"`
	Seconds []SecondJSON `json:"seconds,omitempty"`
}

// Latency summarizes one histogram in milliseconds.
type Latency struct {
	MeanMs      float64      `json:"mean_ms"`
	StdevMs     float64      `json:"stdev_ms"`
	MaxMs       float64      `json:"max_ms"`
	Percentiles []Percentile `json:"percentiles"`
}

// Percentile is one rung of the ladder.
type Percentile struct {
	P  float64 `json:"p"`
	Ms float64 `json:"ms"`
}

// CPUReport is CPU in JSON.
type CPUReport struct {
	Cores         float64 `json:"cores"`
	UserSeconds   float64 `json:"user_seconds"`
	SystemSeconds float64 `json:"system_seconds"`
	NumCPU        int     `json:"num_cpu"`
}

// BreakdownJSON is a Breakdown in JSON.
type BreakdownJSON struct {
	Op       string           `json:"op"`
	Node     string           `json:"node,omitempty"`
	Requests int64            `json:"requests"`
	NotFound int64            `json:"not_found"`
	Errors   map[string]int64 `json:"errors"`
	Latency  Latency          `json:"latency"`
}

func ms(ns float64) float64 { return math.Round(ns/1e3) / 1e3 }

// LatencyOf summarizes h (ns) over the Ladder.
func LatencyOf(h *hdr.Histogram) Latency {
	l := Latency{MeanMs: ms(h.Mean()), StdevMs: ms(h.StdDev()), MaxMs: ms(float64(h.Max()))}
	for _, p := range Ladder() {
		l.Percentiles = append(l.Percentiles, Percentile{P: p, Ms: ms(float64(h.ValueAtPercentile(p)))})
	}
	return l
}

// At returns the latency at percentile p of the ladder, or NaN when it has no such rung.
func (l Latency) At(p float64) float64 {
	for _, x := range l.Percentiles {
		if x.P == p {
			return x.Ms
		}
	}
	return math.NaN()
}

func kindMap(m map[Kind]int64) map[string]int64 {
	out := map[string]int64{}
	for _, k := range ErrorKinds() {
		out[string(k)] = m[k]
	}
	return out
}

// Report returns the JSON form of r; target names what was loaded ("grpc 127.0.0.1:9090").
func (r *Result) Report(target string) Report {
	c := r.Config
	rep := Report{
		Target: target, Workload: c.Workload.String(), KeyDist: c.KeyDist.String(), Keys: c.Keys,
		ValueSize: c.ValueSize.String(), Connections: c.Connections,
		RateAsked: c.Rate, RateAchieved: math.Round(r.Achieved*10) / 10,
		DurationSeconds: math.Round(r.Elapsed.Seconds()*1000) / 1000,
		Requests:        r.Requests, Successes: r.Successes(), SuccessRatio: math.Round(r.SuccessRatio()*1e4) / 1e4,
		NotFound: r.NotFound, Errors: kindMap(r.Errors),
		Latency: LatencyOf(r.Corrected), Uncorrected: LatencyOf(r.Uncorrected), SendLag: LatencyOf(r.SendLag),
		CPU: CPUReport{
			Cores: math.Round(r.CPU.Cores*100) / 100, UserSeconds: r.CPU.User.Seconds(),
			SystemSeconds: r.CPU.System.Seconds(), NumCPU: r.CPU.NumCPU,
		},
		Unsent: r.Unsent, Invalid: r.Invalid, InvalidReason: r.InvalidReason, Interrupted: r.Interrupted,
	}
	measured := r.Start.Add(c.Warmup)
	if r.Events != nil || r.Phases != nil {
		rep.Events = eventsJSON(measured, r.Events)
		rep.Phases = phasesJSON(measured, r.Phases)
	}
	rep.Seconds = secondsJSON(r.Start, measured, r.Intervals)
	for _, b := range r.Breakdown {
		rep.Breakdown = append(rep.Breakdown, BreakdownJSON{
			Op: b.Op, Node: b.Class, Requests: b.Requests, NotFound: b.NotFound,
			Errors: kindMap(b.Errors), Latency: LatencyOf(b.Latency),
		})
	}
	return rep
}

// ReadReport decodes a Report written by kvctl bench --json.
func ReadReport(rd io.Reader) (Report, error) {
	var rep Report
	if err := json.NewDecoder(rd).Decode(&rep); err != nil {
		return Report{}, fmt.Errorf("%w: %w", ErrBadReport, err)
	}
	if len(rep.Latency.Percentiles) == 0 {
		return Report{}, fmt.Errorf("%w: no latency percentiles", ErrBadReport)
	}
	return rep, nil
}

// fmtDur prints a duration the way wrk does: 1.23ms, 456.00us, 1.50s.
func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return fmt.Sprintf("%.2fm", d.Minutes())
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fus", float64(d)/1e3)
}

// SummaryOptions tune WriteSummary.
type SummaryOptions struct {
	// Target names what was loaded.
	Target string
	// Detailed adds HdrHistogram's full percentile spectrum (wrk2's --latency).
	Detailed bool
	// ByClass prints the per-operation, per-class breakdown.
	ByClass bool
}

// WriteSummary writes a wrk2-style summary of r.
func WriteSummary(w io.Writer, r *Result, o SummaryOptions) error {
	ew := &errWriter{w: w}
	c := r.Config
	mode := fmt.Sprintf("%.0f req/s", c.Rate)
	if c.Rate == 0 {
		mode = "closed loop (max rate)"
	}
	ew.printf("%s test @ %s: %s, %s, %d keys %s, values %s B\n", fmtDur(c.Duration), o.Target, mode,
		c.Workload, c.Keys, c.KeyDist, c.ValueSize)
	ew.printf("  %d connections, warmup %s excluded\n", c.Connections, c.Warmup)
	// The success ratio first, as vegeta does: latencies mean nothing when requests fail.
	ew.printf("Success ratio: %.2f%% (%d of %d requests", 100*r.SuccessRatio(), r.Successes(), r.Requests)
	if n := r.ErrorCount(); n > 0 {
		ew.printf("; %d errors: %s", n, errorsByKind(r.Errors))
	}
	ew.printf(")\n")
	if r.Invalid {
		ew.printf("  INVALID RESULT: %s\n", r.InvalidReason)
	}
	if r.Unsent > 0 {
		ew.printf("  %d scheduled requests never sent: the generator ended %s behind\n", r.Unsent, fmtDur(r.FinalLag))
	}
	if r.Interrupted {
		ew.printf("  interrupted: the result covers the part that ran\n")
	}
	if r.Corrected.TotalCount() == 0 {
		// No ladder of zeros: without one successful request there is no latency.
		ew.printf("  no request succeeded: no latency to report\n")
	} else if err := writeLatency(ew, r, o.Detailed); err != nil {
		return err
	}
	ew.printf("  %d requests in %.2fs, %d errors, %d not found\n", r.Requests, r.Elapsed.Seconds(), r.ErrorCount(), r.NotFound)
	if c.Rate > 0 {
		ew.printf("Requests/sec: %10.2f (asked %.2f, %.1f%%), %.2f successful\n", r.Achieved, c.Rate, 100*r.Achieved/c.Rate,
			float64(r.Successes())/r.Elapsed.Seconds())
	} else {
		ew.printf("Requests/sec: %10.2f, %.2f successful\n", r.Achieved, float64(r.Successes())/r.Elapsed.Seconds())
	}
	ew.printf("Generator CPU: %s\n", r.CPU)
	if o.ByClass && len(r.Breakdown) > 0 {
		ew.printf("\n  %-8s %-16s %10s %8s %10s %10s %10s\n", "op", "node", "requests", "errors", "p50", "p99", "max")
		for _, b := range r.Breakdown {
			class := b.Class
			if class == "" {
				class = "-"
			}
			ew.printf("  %-8s %-16s %10d %8d %10s %10s %10s\n", b.Op, class, b.Requests, sumErrors(b.Errors),
				fmtDur(time.Duration(b.Latency.ValueAtPercentile(50))), fmtDur(time.Duration(b.Latency.ValueAtPercentile(99))),
				fmtDur(time.Duration(b.Latency.Max())))
		}
	}
	writeEvents(ew, r)
	return ew.err
}

// writeEvents writes the run's events and its phases (a line each), when it followed the
// cluster.
func writeEvents(ew *errWriter, r *Result) {
	if r.Events == nil && r.Phases == nil {
		return
	}
	measured := r.Start.Add(r.Config.Warmup)
	ew.printf("\nEvents (seconds from the end of the warmup):\n")
	if len(r.Events) == 0 {
		ew.printf("  none: the cluster's ring, members and repairs did not change\n")
	}
	for _, e := range r.Events {
		ew.printf("  %8.1fs  %-12s %s\n", e.At.Sub(measured).Seconds(), e.Kind, e.Text)
	}
	ew.printf("\nPhases:\n  %-14s %15s %9s %10s %7s %10s %10s %10s %10s\n",
		"phase", "window", "requests", "rate", "errors", "p50", "p99", "p99.9", "max")
	for _, p := range r.Phases {
		window := fmt.Sprintf("%.0f-%.0fs", p.Start.Sub(measured).Seconds(), p.End.Sub(measured).Seconds())
		ew.printf("  %-14s %15s %9d %8.1f/s %7d", p.Name, window, p.Requests, p.Rate(), p.Errors)
		if p.Latency.TotalCount() == 0 {
			ew.printf(" %10s %10s %10s %10s\n", "-", "-", "-", "-")
			continue
		}
		ew.printf(" %10s %10s %10s %10s\n", fmtDur(time.Duration(p.Latency.ValueAtPercentile(50))),
			fmtDur(time.Duration(p.Latency.ValueAtPercentile(99))), fmtDur(time.Duration(p.Latency.ValueAtPercentile(99.9))),
			fmtDur(time.Duration(p.Latency.Max())))
	}
}

// writeLatency writes the latency ladder (and with detailed HdrHistogram's full spectrum),
// then the mean, stdev and max of the corrected and uncorrected latency and the send lag.
func writeLatency(ew *errWriter, r *Result, detailed bool) error {
	ew.printf("  Latency Distribution (HdrHistogram - Recorded Latency, corrected for coordinated omission)\n")
	for _, p := range Ladder() {
		ew.printf(" %7.3f%% %10s\n", p, fmtDur(time.Duration(r.Corrected.ValueAtPercentile(p))))
	}
	if detailed {
		ew.printf("\n  Detailed Percentile spectrum:\n")
		if err := WriteHgrm(ew, r.Corrected); err != nil {
			return err
		}
		ew.printf("----------------------------------------------------------\n")
	}
	ew.printf("\n  %-12s %10s %10s %10s\n", "", "Avg", "Stdev", "Max")
	for _, row := range []struct {
		name string
		h    *hdr.Histogram
	}{{"Latency", r.Corrected}, {"Uncorrected", r.Uncorrected}, {"Send lag", r.SendLag}} {
		ew.printf("  %-12s %10s %10s %10s   p99 %s\n", row.name, fmtDur(time.Duration(row.h.Mean())),
			fmtDur(time.Duration(row.h.StdDev())), fmtDur(time.Duration(row.h.Max())),
			fmtDur(time.Duration(row.h.ValueAtPercentile(99))))
	}
	return ew.err
}

// WriteHgrm writes h (ns) in HdrHistogram's percentile-distribution format, values in ms
// (what wrk2 prints and HdrHistogram's plotter reads).
func WriteHgrm(w io.Writer, h *hdr.Histogram) error {
	_, err := h.PercentilesPrint(w, 5, 1e6)
	return err
}

// WriteBuckets writes every non-empty bucket of h (ns) as "µs count" lines, the value being the
// bucket's lowest value truncated to µs (as wrk truncates its µs clock): the whole histogram,
// for post-processing that percentiles cannot carry (bench/run.sh applies wrk's correction).
func WriteBuckets(w io.Writer, h *hdr.Histogram) error {
	ew := &errWriter{w: w}
	for _, b := range h.Distribution() {
		if b.Count > 0 {
			ew.printf("%d %d\n", b.From/1000, b.Count)
		}
	}
	return ew.err
}

// WriteHlog writes r.Intervals as an HdrHistogram interval log (timestamps relative to the
// run's start, max column in ms).
func WriteHlog(w io.Writer, r *Result) error {
	lw := hdr.NewHistogramLogWriter(w)
	start := r.Start.UnixMilli()
	lw.SetBaseTime(start)
	for _, f := range []func() error{
		lw.OutputLogFormatVersion,
		func() error { return lw.OutputComment("[Logged with kvctl bench, values in ns]") },
		func() error { return lw.OutputStartTime(start) },
		func() error { return lw.OutputBaseTime(start) },
		lw.OutputLegend,
	} {
		if err := f(); err != nil {
			return err
		}
	}
	events := r.Events
	comment := func(e Event) error {
		// A comment line ("#..."), which HdrHistogram log readers skip: the offset from the
		// start of the log, the kind and the text.
		return lw.OutputComment(fmt.Sprintf("[Event: %.3f %s %s]", e.At.Sub(r.Start).Seconds(), e.Kind, e.Text))
	}
	for _, iv := range r.Intervals {
		for len(events) > 0 && !events[0].At.After(r.Start.Add(iv.End)) {
			if err := comment(events[0]); err != nil {
				return err
			}
			events = events[1:]
		}
		if iv.Hist == nil {
			continue
		}
		if err := lw.OutputIntervalPackedHistogram(iv.Hist); err != nil {
			return err
		}
	}
	for _, e := range events {
		if err := comment(e); err != nil {
			return err
		}
	}
	return nil
}

// WriteDiff prints the change from old to new: rate, mean, the ladder, errors; then phase by
// phase for runs that followed the cluster (phases matched by name, the others listed).
func WriteDiff(w io.Writer, old, new Report) error {
	ew := &errWriter{w: w}
	ew.printf("%-14s %14s %14s %10s\n", "", "old", "new", "change")
	row := func(name string, a, b float64, unit string) {
		change := "n/a"
		if a != 0 && !math.IsNaN(a) && !math.IsNaN(b) {
			change = fmt.Sprintf("%+.1f%%", 100*(b-a)/a)
		}
		ew.printf("%-14s %14s %14s %10s\n", name, fmt.Sprintf("%.3f%s", a, unit), fmt.Sprintf("%.3f%s", b, unit), change)
	}
	row("rate asked", old.RateAsked, new.RateAsked, "/s")
	row("rate achieved", old.RateAchieved, new.RateAchieved, "/s")
	row("mean", old.Latency.MeanMs, new.Latency.MeanMs, "ms")
	for _, p := range Ladder() {
		row(percentileName(p), old.Latency.At(p), new.Latency.At(p), "ms")
	}
	kinds := slices.Sorted(maps.Keys(old.Errors))
	for _, k := range slices.Sorted(maps.Keys(new.Errors)) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		if old.Errors[k] != 0 || new.Errors[k] != 0 {
			row("errors "+k, float64(old.Errors[k]), float64(new.Errors[k]), "")
		}
	}
	if old.Invalid || new.Invalid {
		ew.printf("note: invalid run(s): old %t, new %t\n", old.Invalid, new.Invalid)
	}
	writePhaseDiff(ew, old, new, row)
	return ew.err
}

// writePhaseDiff compares the phases the two runs share, matched by name in the old run's
// order, and lists the phases only one of them has.
func writePhaseDiff(ew *errWriter, old, new Report, row func(name string, a, b float64, unit string)) {
	if len(old.Phases) == 0 && len(new.Phases) == 0 {
		return
	}
	byName := func(ps []PhaseJSON) map[string]PhaseJSON {
		m := map[string]PhaseJSON{}
		for _, p := range ps {
			m[p.Name] = p
		}
		return m
	}
	oldBy, newBy := byName(old.Phases), byName(new.Phases)
	var onlyOld, onlyNew []string
	for _, a := range old.Phases {
		b, ok := newBy[a.Name]
		if !ok {
			onlyOld = append(onlyOld, a.Name)
			continue
		}
		ew.printf("\nphase %-8s %14s %14s %10s\n", a.Name, fmt.Sprintf("%.0f-%.0fs", a.StartS, a.EndS), fmt.Sprintf("%.0f-%.0fs", b.StartS, b.EndS), "")
		row("  rate", a.Rate, b.Rate, "/s")
		row("  p50", a.P50Ms, b.P50Ms, "ms")
		row("  p99", a.P99Ms, b.P99Ms, "ms")
		row("  p99.9", a.P999Ms, b.P999Ms, "ms")
		row("  max", a.MaxMs, b.MaxMs, "ms")
		row("  errors", float64(a.Errors), float64(b.Errors), "")
	}
	for _, b := range new.Phases {
		if _, ok := oldBy[b.Name]; !ok {
			onlyNew = append(onlyNew, b.Name)
		}
	}
	if len(onlyOld) > 0 {
		ew.printf("\nonly in old: %s\n", strings.Join(onlyOld, ", "))
	}
	if len(onlyNew) > 0 {
		ew.printf("only in new: %s\n", strings.Join(onlyNew, ", "))
	}
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, a ...any) { fmt.Fprintf(e, format, a...) }
