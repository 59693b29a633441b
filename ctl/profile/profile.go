// Package profile captures pprof profiles and traces on cluster nodes over the Admin API,
// writes them where go tool pprof opens them, and finds their hottest functions: kvctl pprof,
// bench --profile, debug and the console's profile action share it.
package profile

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

	"ringkv/ctl/cli"
	"ringkv/node/admin"
	"ringkv/proto/kvpb"
)

// Kinds are the profile kinds a node captures (the node's own list, node/admin).
var Kinds = admin.Kinds[:]

// DefaultSeconds is how long a node records a profile of kind asked with 0 seconds (0 for the
// instant kinds).
func DefaultSeconds(kind string) int { return admin.DefaultSeconds(kind) }

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
	for _, c := range CaptureEach(ctx, f, nodes, kinds, seconds, dir, prefix, 30*time.Second) {
		if c.Err != nil {
			errs = append(errs, c.Err)
			continue
		}
		files = append(files, c.File)
	}
	return files, errors.Join(errs...)
}

// Captured is one capture of CaptureEach: the file written, or why none was.
type Captured struct {
	Node Node
	Kind string
	File string
	Err  error
}

// CaptureEach is Capture reporting each capture on its own; slack bounds each capture beyond
// its length.
func CaptureEach(ctx context.Context, f *cli.Factory, nodes []Node, kinds []string, seconds int, dir, prefix string, slack time.Duration) []Captured {
	out := make([]Captured, 0, len(nodes)*len(kinds))
	for _, n := range nodes {
		for _, k := range kinds {
			out = append(out, Captured{Node: n, Kind: k})
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		for i := range out {
			out[i].Err = fmt.Errorf("profile dir: %w", err)
		}
		return out
	}
	ts := time.Now().UTC().Format("20060102T150405Z")
	var wg sync.WaitGroup
	for i := range out {
		c := &out[i]
		path := filepath.Join(dir, FileName(prefix, c.Node.Label(), c.Kind, ts))
		wg.Go(func() {
			secs := seconds
			if secs == 0 {
				secs = DefaultSeconds(c.Kind)
			}
			cctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+slack)
			defer cancel()
			var err error
			if c.File, err = captureFile(cctx, f, c.Node, c.Kind, seconds, path); err != nil {
				c.Err = fmt.Errorf("%s %s: %w", c.Node.Label(), c.Kind, err)
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
