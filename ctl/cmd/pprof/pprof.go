// Package pprof holds `kvctl pprof`: profiles captured on cluster nodes over the Admin API,
// written where `go tool pprof` opens them, and summarised with --top.
package pprof

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/ctl/profile"
)

// Options are pprof's arguments and flags.
type Options struct {
	IO      *cli.IOStreams
	Factory *cli.Factory
	Kind    string
	NodeID  string
	All     bool
	Seconds int
	Dir     string
	Top     int
	// Timeout bounds each capture beyond its own length.
	Timeout time.Duration
}

// NewCmdPprof returns `kvctl pprof KIND`. runF replaces the run step in tests.
func NewCmdPprof(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Factory: f, Dir: ".", Timeout: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "pprof cpu|heap|allocs|mutex|block|goroutine|trace",
		Short: "Capture a profile on one node or all of them; --top prints the hottest functions",
		Long: `Capture a profile on cluster nodes through the Admin API (only a node's gRPC address is
needed) and write <node>-<kind>-<timestamp>.pb.gz into --dir, ready for go tool pprof
(a trace is written as <node>-trace-<timestamp>.trace, for go tool trace).

Without --node or --all the node at --addr is profiled. cpu and trace record for --seconds;
mutex and block switch the runtime's sampling on for --seconds and keep the events of that
window; heap, allocs and goroutine are instant. Several nodes are captured in parallel.

The directory flag is --dir (-d): -o is kvctl's global output format flag.`,
		Example: `  kvctl pprof cpu --seconds 10 --top 15
  kvctl pprof heap --all -d /tmp/prof
  kvctl pprof mutex --node n2 --seconds 5 --top 10
  go tool pprof -http : /tmp/prof/n1-heap-20260101T120000Z.pb.gz`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: profile.Kinds,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Kind = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.NodeID, "node", "", "capture on the node with this id")
	fl.BoolVar(&o.All, "all", false, "capture on every answering node of the ring")
	fl.IntVar(&o.Seconds, "seconds", 0, "capture length for cpu, trace, mutex, block (0 = the node's default: 5s, trace 1s)")
	fl.StringVarP(&o.Dir, "dir", "d", o.Dir, "directory to write profiles into (not -o: that is the output format)")
	fl.IntVar(&o.Top, "top", 0, "print the N hottest functions per node, flat and cumulative")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of each capture beyond its length")
	cmd.MarkFlagsMutuallyExclusive("node", "all")
	_ = cmd.RegisterFlagCompletionFunc("node", f.CompleteNodeIDs)
	return cmd
}

func (o *Options) validate() error {
	switch {
	case !slices.Contains(profile.Kinds, o.Kind):
		return cli.UsageErrorf("profile kind %q: want one of %s", o.Kind, strings.Join(profile.Kinds, ", "))
	case o.Seconds < 0 || o.Seconds > 300:
		return cli.UsageErrorf("--seconds %d: want 0..300", o.Seconds)
	case o.Top < 0:
		return cli.UsageErrorf("--top %d: want >= 0", o.Top)
	case o.Top > 0 && o.Kind == "trace":
		return cli.UsageErrorf("--top does not apply to a trace")
	case o.Timeout <= 0:
		return cli.UsageErrorf("--timeout must be positive")
	}
	return nil
}

// result is one capture for -o json and the table.
type result struct {
	Node  string            `json:"node"`
	Kind  string            `json:"kind"`
	File  string            `json:"file,omitempty"`
	Error string            `json:"error,omitempty"`
	Unit  string            `json:"unit,omitempty"`
	Total int64             `json:"total,omitempty"`
	Top   []profile.FuncRow `json:"top,omitempty"`
}

func run(ctx context.Context, o *Options) error {
	nodes, err := profile.ResolveNodes(ctx, o.Factory, o.NodeID, o.All)
	if err != nil {
		return err
	}
	secs := o.Seconds
	if secs == 0 {
		secs = profile.DefaultSeconds(o.Kind)
	}
	if secs > 0 {
		fmt.Fprintf(o.IO.ErrOut, "capturing %s on %d node(s) for %ds...\n", o.Kind, len(nodes), secs)
	} else {
		fmt.Fprintf(o.IO.ErrOut, "capturing %s on %d node(s)...\n", o.Kind, len(nodes))
	}
	caps := profile.CaptureEach(ctx, o.Factory, nodes, []string{o.Kind}, o.Seconds, o.Dir, "", o.Timeout)
	var results []result
	var errs []error
	for _, c := range caps {
		r := result{Node: c.Node.Label(), Kind: c.Kind, File: c.File}
		if c.Err != nil {
			r.Error = c.Err.Error()
			errs = append(errs, c.Err)
		} else if o.Top > 0 {
			rows, unit, total, err := profile.TopFile(c.File, o.Top)
			if err != nil {
				r.Error = err.Error()
				errs = append(errs, err)
			}
			r.Top, r.Unit, r.Total = rows, unit, total
		}
		results = append(results, r)
	}
	if o.Factory.JSON() {
		if err := cli.PrintJSON(o.IO.Out, results); err != nil {
			return err
		}
	} else if err := printResults(o.IO, results, o.Top > 0); err != nil {
		return err
	}
	if len(errs) == len(caps) {
		return fmt.Errorf("no profile captured: %w", errors.Join(errs...))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d captures failed", len(errs), len(caps))
	}
	return nil
}

func printResults(ios *cli.IOStreams, results []result, top bool) error {
	t := cli.NewTable(ios, "NODE", "KIND", "FILE")
	for _, r := range results {
		f := r.File
		if r.Error != "" {
			f = "error: " + r.Error
		}
		t.Row(r.Node, r.Kind, f)
	}
	if err := t.Render(); err != nil {
		return err
	}
	for _, r := range results {
		if top && r.Error == "" && len(r.Top) == 0 {
			fmt.Fprintf(ios.Out, "\n%s %s: no samples (an idle node has none to show)\n", r.Node, r.Kind)
		}
		if len(r.Top) == 0 {
			continue
		}
		fmt.Fprintf(ios.Out, "\n%s %s: top %d by %s (total %s)\n", r.Node, r.Kind, len(r.Top), r.Unit, formatValue(r.Total, r.Unit))
		t := cli.NewTable(ios, "FLAT", "FLAT%", "CUM", "CUM%", "FUNCTION")
		for _, row := range r.Top {
			t.Row(formatValue(row.Flat, r.Unit), pct(row.Flat, r.Total), formatValue(row.Cum, r.Unit), pct(row.Cum, r.Total), row.Function)
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	return nil
}

func pct(v, total int64) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(v)/float64(total))
}

func formatValue(v int64, unit string) string {
	switch {
	case strings.HasSuffix(unit, "nanoseconds"):
		return time.Duration(v).Round(time.Microsecond).String()
	case strings.HasSuffix(unit, "bytes"), strings.HasSuffix(unit, "space"):
		return present.Bytes(uint64(max(v, 0)))
	}
	return fmt.Sprint(v)
}
