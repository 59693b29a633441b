// Package pprof holds `kvctl pprof`: profiles captured on cluster nodes over the Admin API,
// written where `go tool pprof` opens them, and summarised with --top.
package pprof

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/node/admin"
	"ringkv/proto/kvpb"
)

// Kinds are the profile kinds a node captures.
var Kinds = admin.Kinds[:]

// Node is one node to capture from.
type Node struct {
	ID   string
	Addr string // gRPC address
	// Also are the other nodes served by the same process (kvctl demo): a runtime profile is
	// the process's, so it is captured once, from ID, and labelled with all of them.
	Also []string
}

// Label names what a capture covers: "n1", or "n1+n2+n3" for nodes sharing a process.
func (n Node) Label() string {
	return strings.Join(append([]string{n.ID}, n.Also...), "+")
}

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
		ValidArgs: Kinds,
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
	case !slices.Contains(Kinds, o.Kind):
		return cli.UsageErrorf("profile kind %q: want one of %s", o.Kind, strings.Join(Kinds, ", "))
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
	Node  string    `json:"node"`
	Kind  string    `json:"kind"`
	File  string    `json:"file,omitempty"`
	Error string    `json:"error,omitempty"`
	Unit  string    `json:"unit,omitempty"`
	Total int64     `json:"total,omitempty"`
	Top   []FuncRow `json:"top,omitempty"`
}

func run(ctx context.Context, o *Options) error {
	nodes, err := ResolveNodes(ctx, o.Factory, o.NodeID, o.All)
	if err != nil {
		return err
	}
	secs := o.Seconds
	if secs == 0 {
		secs = admin.DefaultSeconds(o.Kind)
	}
	if secs > 0 {
		fmt.Fprintf(o.IO.ErrOut, "capturing %s on %d node(s) for %ds...\n", o.Kind, len(nodes), secs)
	} else {
		fmt.Fprintf(o.IO.ErrOut, "capturing %s on %d node(s)...\n", o.Kind, len(nodes))
	}
	caps := capture(ctx, o.Factory, nodes, []string{o.Kind}, o.Seconds, o.Dir, "", o.Timeout)
	var results []result
	var errs []error
	for _, c := range caps {
		r := result{Node: c.node.Label(), Kind: c.kind, File: c.file}
		if c.err != nil {
			r.Error = c.err.Error()
			errs = append(errs, c.err)
		} else if o.Top > 0 {
			rows, unit, total, err := TopFile(c.file, o.Top)
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

// ResolveNodes picks the nodes to capture from: the one named id, every answering node of
// the ring (all), or else the node at f.Addr.
func ResolveNodes(ctx context.Context, f *cli.Factory, id string, all bool) ([]Node, error) {
	c, err := f.Admin("")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if id == "" && !all {
		info, err := c.NodeInfo(ctx, &kvpb.NodeInfoRequest{})
		if err != nil {
			return nil, cli.RPCError(f.Addr, err)
		}
		return []Node{{ID: info.GetId(), Addr: f.Addr}}, nil
	}
	st, err := c.Status(ctx, &kvpb.StatusRequest{})
	if err != nil {
		return nil, cli.RPCError(f.Addr, err)
	}
	var nodes []Node
	var ids []string
	byProcess := map[string]int{} // process -> index in nodes
	for _, n := range st.GetNodes() {
		ids = append(ids, n.GetId())
		switch {
		case id != "" && n.GetId() == id:
			return []Node{{ID: n.GetId(), Addr: n.GetGrpcAddr()}}, nil
		case all && n.GetError() == "":
			if p := n.GetInfo().GetProcess(); p != "" {
				if i, ok := byProcess[p]; ok {
					nodes[i].Also = append(nodes[i].Also, n.GetId())
					continue
				}
				byProcess[p] = len(nodes)
			}
			nodes = append(nodes, Node{ID: n.GetId(), Addr: n.GetGrpcAddr()})
		case all:
			fmt.Fprintf(f.IO.ErrOut, "skipping %s: %s\n", n.GetId(), n.GetError())
		}
	}
	for _, n := range nodes {
		if len(n.Also) > 0 {
			fmt.Fprintf(f.IO.ErrOut, "%s share one process (as in kvctl demo): its profiles are captured once, as %s\n",
				strings.Join(append([]string{n.ID}, n.Also...), ", "), n.Label())
		}
	}
	if id != "" {
		return nil, cli.UsageErrorf("--node %q: not in the ring (nodes: %s)", id, strings.Join(ids, ", "))
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no node of the ring answers")
	}
	return nodes, nil
}

// Capture takes each kind of profile on each node in parallel and writes the files into dir:
// <node>-<kind>-<timestamp>.pb.gz, or <prefix>-<node>-<kind>.pb.gz when prefix is set (traces
// end in .trace; an existing file is never replaced: the name gets -2, -3, ...). Nodes that
// share a process are one Node (see Node.Also), named n1+n2+n3. seconds is the length of the timed kinds (0 = the node's default). It
// returns the files written, and the failed captures joined in one error. For kvctl bench
// --profile: start it when the measured phase starts, with seconds = the phase's length.
func Capture(ctx context.Context, f *cli.Factory, nodes []Node, kinds []string, seconds int, dir, prefix string) ([]string, error) {
	var files []string
	var errs []error
	for _, c := range capture(ctx, f, nodes, kinds, seconds, dir, prefix, 30*time.Second) {
		if c.err != nil {
			errs = append(errs, c.err)
			continue
		}
		files = append(files, c.file)
	}
	return files, errors.Join(errs...)
}

type captured struct {
	node Node
	kind string
	file string
	err  error
}

func capture(ctx context.Context, f *cli.Factory, nodes []Node, kinds []string, seconds int, dir, prefix string, slack time.Duration) []captured {
	out := make([]captured, 0, len(nodes)*len(kinds))
	for _, n := range nodes {
		for _, k := range kinds {
			out = append(out, captured{node: n, kind: k})
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		for i := range out {
			out[i].err = fmt.Errorf("profile dir: %w", err)
		}
		return out
	}
	ts := time.Now().UTC().Format("20060102T150405Z")
	var wg sync.WaitGroup
	for i := range out {
		c := &out[i]
		path := filepath.Join(dir, FileName(prefix, c.node.Label(), c.kind, ts))
		wg.Go(func() {
			secs := seconds
			if secs == 0 {
				secs = admin.DefaultSeconds(c.kind)
			}
			cctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+slack)
			defer cancel()
			var err error
			if c.file, err = captureFile(cctx, f, c.node, c.kind, seconds, path); err != nil {
				c.err = fmt.Errorf("%s %s: %w", c.node.Label(), c.kind, err)
			}
		})
	}
	wg.Wait()
	return out
}

// FileName is the name of a captured profile (see Capture).
func FileName(prefix, node, kind, ts string) string {
	ext := ".pb.gz"
	if kind == "trace" {
		ext = ".trace"
	}
	node = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' || r == ' ' {
			return '_'
		}
		return r
	}, node)
	if prefix != "" {
		return fmt.Sprintf("%s-%s-%s%s", prefix, node, kind, ext)
	}
	return fmt.Sprintf("%s-%s-%s%s", node, kind, ts, ext)
}

// captureFile captures one profile into path, or, when a file of that name exists (two
// captures in the same second), path with -2, -3, ... before its extension; it returns the
// file written.
func captureFile(ctx context.Context, f *cli.Factory, n Node, kind string, seconds int, path string) (string, error) {
	c, err := f.Admin(n.Addr)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kvctl-pprof-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := Fetch(ctx, c, kind, seconds, tmp); err != nil {
		tmp.Close()
		return "", cli.RPCError(n.Addr, err)
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return placeNew(tmp.Name(), path)
}

// placeNew gives the file tmp the name path without replacing an existing file: a hard link
// fails when the name is taken, and the next name is tried.
func placeNew(tmp, path string) (string, error) {
	base, ext := path, ""
	for _, e := range []string{".pb.gz", ".trace"} {
		if strings.HasSuffix(path, e) {
			base, ext = strings.TrimSuffix(path, e), e
		}
	}
	for i := 1; i <= 1000; i++ {
		name := path
		if i > 1 {
			name = fmt.Sprintf("%s-%d%s", base, i, ext)
		}
		err := os.Link(tmp, name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("write %s: %w", name, err)
		}
	}
	return "", fmt.Errorf("write %s: 1000 files of that name exist", path)
}

// Fetch streams one profile from a node's Admin.Profile into w.
func Fetch(ctx context.Context, c kvpb.AdminClient, kind string, seconds int, w io.Writer) error {
	stream, err := c.Profile(ctx, &kvpb.ProfileRequest{Kind: kind, Seconds: uint32(max(seconds, 0))})
	if err != nil {
		return err
	}
	var n int
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		m, err := w.Write(chunk.GetData())
		if err != nil {
			return fmt.Errorf("write profile: %w", err)
		}
		n += m
	}
	if n == 0 {
		return fmt.Errorf("empty %s profile", kind)
	}
	return nil
}

// FuncRow is one function of a --top listing: flat is the value of the samples where it is
// the leaf, cum of those where it is anywhere on the stack.
type FuncRow struct {
	Function string `json:"function"`
	Flat     int64  `json:"flat"`
	Cum      int64  `json:"cum"`
}

// TopFile reads a profile file and returns its n hottest functions (see Top).
func TopFile(path string, n int) ([]FuncRow, string, int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, "", 0, err
	}
	defer fh.Close()
	p, err := profile.Parse(fh)
	if err != nil {
		return nil, "", 0, fmt.Errorf("parse %s: %w", path, err)
	}
	rows, unit, total := Top(p, n)
	return rows, unit, total, nil
}

// Top aggregates p by function name over its default sample type (the last one when the
// profile names none: cpu time, in-use bytes) and returns the n functions with the highest
// flat value (ties by cumulative value, then name), the sample type as "type unit", and the
// total.
func Top(p *profile.Profile, n int) ([]FuncRow, string, int64) {
	if len(p.SampleType) == 0 {
		return nil, "", 0
	}
	idx := len(p.SampleType) - 1
	if p.DefaultSampleType != "" {
		for i, st := range p.SampleType {
			if st.Type == p.DefaultSampleType {
				idx = i
			}
		}
	}
	unit := p.SampleType[idx].Type + " " + p.SampleType[idx].Unit
	flat, cum := map[string]int64{}, map[string]int64{}
	var total int64
	seen := map[string]bool{}
	for _, s := range p.Sample {
		v := s.Value[idx]
		if v == 0 {
			continue
		}
		total += v
		clear(seen)
		leaf := true
		for _, loc := range s.Location {
			// Line[0] is the innermost (inlined) function of a location.
			for _, l := range loc.Line {
				name := "?"
				if l.Function != nil {
					name = l.Function.Name
				}
				if leaf {
					flat[name] += v
					leaf = false
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
			if len(loc.Line) == 0 {
				name := fmt.Sprintf("%#x", loc.Address)
				if leaf {
					flat[name] += v
					leaf = false
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
		}
	}
	rows := make([]FuncRow, 0, len(cum))
	for name, c := range cum {
		rows = append(rows, FuncRow{Function: name, Flat: flat[name], Cum: c})
	}
	slices.SortFunc(rows, func(a, b FuncRow) int {
		switch {
		case a.Flat != b.Flat:
			return cmpDesc(a.Flat, b.Flat)
		case a.Cum != b.Cum:
			return cmpDesc(a.Cum, b.Cum)
		}
		return strings.Compare(a.Function, b.Function)
	})
	if n > 0 && len(rows) > n {
		rows = rows[:n]
	}
	return rows, unit, total
}

func cmpDesc(a, b int64) int {
	if a > b {
		return -1
	}
	return 1
}
