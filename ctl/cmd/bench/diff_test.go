package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ringkv/ctl/cli"
	"ringkv/loadgen"
)

// report is a bench --json result with the phases named, each with p99 = p99.
func report(p99 float64, phases ...string) loadgen.Report {
	rep := loadgen.Report{RateAsked: 100, RateAchieved: 100,
		Latency: loadgen.Latency{Percentiles: []loadgen.Percentile{{P: 50, Ms: 1}, {P: 99, Ms: p99}}}}
	for i, name := range phases {
		rep.Phases = append(rep.Phases, loadgen.PhaseJSON{Name: name, StartS: float64(5 * i), EndS: float64(5*i + 5),
			Rate: 100, P50Ms: 1, P99Ms: p99, P999Ms: p99 * 2, MaxMs: p99 * 3})
	}
	return rep
}

// TestBenchDiff: two runs compare phase by phase, matched by name; the phases only one run
// has are listed; a file that is not there, and one that is no bench result, are one line
// each with their exit codes (not found 4, usage 2).
func TestBenchDiff(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, rep loadgen.Report) string {
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.json", report(10, "before", "streaming", "hand-over", "after"))
	b := write("b.json", report(20, "before", "streaming", "after", "n2 down"))
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte("wrk2 output, not json"), 0o644); err != nil {
		t.Fatal(err)
	}

	diff := func(args ...string) (string, error) {
		ios, _, out, _ := cli.Test()
		cmd := NewCmdDiff(cli.NewFactory(ios), nil)
		cmd.SetArgs(args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		err := cmd.Execute()
		return out.String(), err
	}
	got, err := diff(a, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"phase before", "phase streaming", "phase after", "+100.0%", "only in old: hand-over", "only in new: n2 down"} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "phase hand-over") || strings.Contains(got, "phase n2 down") {
		t.Errorf("diff compares a phase only one run has:\n%s", got)
	}

	for _, tt := range []struct {
		name     string
		args     []string
		exit     int
		wantLine string
	}{
		{"missing file", []string{a, filepath.Join(dir, "nope.json")}, cli.ExitNotFound, "nope.json: no such file"},
		{"not a result", []string{garbage, b}, cli.ExitUsage, "garbage.json is not a kvctl bench --json result"},
		{"one file", []string{a}, cli.ExitUsage, "two files"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := diff(tt.args...)
			if got := cli.ExitCode(err); got != tt.exit {
				t.Errorf("exit %d (%v), want %d", got, err, tt.exit)
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantLine) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line with %q", err, tt.wantLine)
			}
		})
	}
}
