// Package debug holds `kvctl debug zip`: everything on-call needs from every reachable node,
// in one file.
package debug

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/ctl/profile"
	"ringkv/proto/kvpb"
)

// NewCmdDebug returns `kvctl debug` and its subcommands.
func NewCmdDebug(f *cli.Factory, runF func(*ZipOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "debug",
		Short: "Collect diagnostics from the cluster",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(NewCmdZip(f, runF))
	return cmd
}

// ZipOptions are `debug zip`'s arguments and flags.
type ZipOptions struct {
	IO      *cli.IOStreams
	Factory *cli.Factory
	File    string
	Redact  bool
	// CPUSeconds is the length of each node's CPU profile; 0 skips it.
	CPUSeconds int
	LogLines   int
	// Timeout bounds each call to a node (the CPU profile gets CPUSeconds more).
	Timeout time.Duration
	// MaxBusyWait bounds the wait for a CPU profile that another capture holds up.
	MaxBusyWait time.Duration
	// HTTP fetches /metrics and the goroutine dump from a node's admin listener.
	HTTP *http.Client
}

// NewCmdZip returns `kvctl debug zip [FILE]`. runF replaces the run step in tests.
func NewCmdZip(f *cli.Factory, runF func(*ZipOptions) error) *cobra.Command {
	o := &ZipOptions{IO: f.IO, Factory: f, CPUSeconds: 5, LogLines: 1000, Timeout: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "zip [FILE]",
		Short: "Write status, ring, stats, metrics, profiles and log tails of every node into a zip",
		Long: `Collect from every node of the ring, in parallel: its status and ring view, a stats
snapshot with per-vnode counters, its Prometheus metrics (from its --admin listener when
this machine can reach it), a goroutine dump, a heap profile, a CPU profile and the tail
of its log (values are never logged). A node that cannot be reached, or a piece that fails,
is recorded in nodes/<id>/errors.txt and in errors.txt; the rest is still collected.
--redact drops network addresses from everything written. Without FILE the zip is
ringkv-debug-<UTC time>.zip in the current directory.`,
		Example: `  kvctl debug zip
  kvctl debug zip /tmp/ringkv-debug.zip
  kvctl debug zip --redact --cpu-seconds 10 incident-42.zip`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.File = DefaultZipName(time.Now())
			if len(args) == 1 {
				o.File = args[0]
			}
			switch {
			case o.CPUSeconds < 0 || o.CPUSeconds > 300:
				return cli.UsageErrorf("--cpu-seconds %d: want 0..300", o.CPUSeconds)
			case o.LogLines < 0:
				return cli.UsageErrorf("--log-lines %d: want >= 0", o.LogLines)
			case o.Timeout <= 0:
				return cli.UsageErrorf("--timeout must be positive")
			}
			if runF != nil {
				return runF(o)
			}
			return RunZip(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&o.Redact, "redact", false, "drop network addresses (IPs, host:port, *_addr fields)")
	fl.IntVar(&o.CPUSeconds, "cpu-seconds", o.CPUSeconds, "length of each node's CPU profile (0 = skip)")
	fl.IntVar(&o.LogLines, "log-lines", o.LogLines, "log lines to fetch per node")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of each call to a node")
	return cmd
}

// DefaultZipName is the zip's name when none is given: ringkv-debug-20260102T150405Z.zip.
func DefaultZipName(now time.Time) string {
	return "ringkv-debug-" + now.UTC().Format("20060102T150405Z") + ".zip"
}

// entry is one file of the zip.
type entry struct {
	name string
	data []byte
}

// nodeDump is what was collected from one node.
type nodeDump struct {
	id      string
	entries []entry
	errs    []string
}

func (d *nodeDump) add(name string, data []byte) { d.entries = append(d.entries, entry{name, data}) }
func (d *nodeDump) fail(what string, err error) {
	d.errs = append(d.errs, fmt.Sprintf("%s: %s", what, present.OneLine(err)))
}

// RunZip collects the diagnostics and writes o.File.
func RunZip(ctx context.Context, o *ZipOptions) error {
	if o.HTTP == nil {
		// With --certs-dir the admin listener serves HTTPS: check it against ca.crt and
		// present the client certificate.
		tlsCfg, err := o.Factory.HTTPTLS()
		if err != nil {
			return err
		}
		o.HTTP = &http.Client{Timeout: o.Timeout, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
		defer o.HTTP.CloseIdleConnections()
	}
	if o.MaxBusyWait == 0 {
		o.MaxBusyWait = 2 * time.Minute
	}
	c, err := o.Factory.Admin("")
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	st, err := c.Status(cctx, &kvpb.StatusRequest{})
	cancel()
	if err != nil {
		return cli.RPCError(o.Factory.Addr, err)
	}
	top := &nodeDump{id: "cluster"}
	top.add("cluster/status.json", o.json(st))
	cctx, cancel = context.WithTimeout(ctx, o.Timeout)
	rg, err := c.Ring(cctx, &kvpb.RingRequest{})
	cancel()
	if err != nil {
		top.fail("ring", cli.RPCError(o.Factory.Addr, err))
	} else {
		top.add("cluster/ring.json", o.json(rg))
	}

	var mu sync.Mutex // guards ErrOut
	progress := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(o.IO.ErrOut, format+"\n", a...)
	}
	nodes := st.GetNodes()
	progress("collecting from %d node(s) (cpu profile %ds)...", len(nodes), o.CPUSeconds)
	dumps := make([]*nodeDump, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			dumps[i] = o.collect(ctx, n)
			if len(dumps[i].errs) == 0 {
				progress("  %s: done", n.GetId())
			} else {
				progress("  %s: %d problem(s): %s", n.GetId(), len(dumps[i].errs), dumps[i].errs[0])
			}
		})
	}
	wg.Wait()

	if err := o.write(top, dumps); err != nil {
		return err
	}
	var failed int
	for _, d := range dumps {
		if len(d.errs) > 0 {
			failed++
		}
	}
	progress("wrote %s (%d node(s), %d with problems: see errors.txt)", o.File, len(dumps), failed)
	return nil
}

// collect fetches everything from one node; failures are recorded, not returned.
func (o *ZipOptions) collect(ctx context.Context, n *kvpb.NodeStatus) *nodeDump {
	d := &nodeDump{id: n.GetId()}
	dir := "nodes/" + safeName(n.GetId()) + "/"
	if n.GetError() != "" {
		d.errs = append(d.errs, "status: "+n.GetError())
	}
	addr := n.GetGrpcAddr()
	c, err := o.Factory.Admin(addr)
	if err != nil {
		d.fail("dial", err)
		return d
	}
	call := func(extra time.Duration) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, o.Timeout+extra)
	}
	cctx, cancel := call(0)
	info, err := c.NodeInfo(cctx, &kvpb.NodeInfoRequest{})
	cancel()
	if err != nil {
		d.fail("node unreachable", cli.RPCError(addr, err))
		return d
	}
	d.add(dir+"nodeinfo.json", o.json(info))

	cctx, cancel = call(0)
	if rg, err := c.Ring(cctx, &kvpb.RingRequest{}); err != nil {
		d.fail("ring", cli.RPCError(addr, err))
	} else {
		d.add(dir+"ring.json", o.json(rg))
	}
	cancel()

	cctx, cancel = call(0)
	if s, err := c.Stats(cctx, &kvpb.StatsRequest{Vnodes: true}); err != nil {
		d.fail("stats", cli.RPCError(addr, err))
	} else {
		d.add(dir+"stats.json", o.json(s))
	}
	cancel()

	if admin := info.GetAdminAddr(); admin == "" {
		d.fail("metrics", errors.New("node reports no admin address; skipped"))
	} else {
		for _, h := range []struct{ path, name string }{
			{"/metrics", "metrics.txt"},
			{"/debug/pprof/goroutine?debug=2", "goroutines.txt"},
		} {
			b, err := o.get(ctx, o.Factory.HTTPScheme()+"://"+admin+h.path)
			if err != nil {
				d.fail(h.name, fmt.Errorf("admin listener not reachable from here, skipped: %w", err))
				continue
			}
			d.add(dir+h.name, o.text(b))
		}
	}

	profiles := []struct {
		kind    string
		seconds int
	}{{"goroutine", 0}, {"heap", 0}}
	if o.CPUSeconds > 0 {
		profiles = append(profiles, struct {
			kind    string
			seconds int
		}{"cpu", o.CPUSeconds})
	}
	for _, p := range profiles {
		b, err := o.profile(ctx, c, p.kind, p.seconds)
		if err != nil {
			d.fail(p.kind+" profile", cli.RPCError(addr, err))
			continue
		}
		d.add(dir+p.kind+".pb.gz", b)
	}

	cctx, cancel = call(0)
	if lt, err := c.LogTail(cctx, &kvpb.LogTailRequest{Lines: uint32(o.LogLines)}); err != nil {
		d.fail("log tail", cli.RPCError(addr, err))
	} else {
		d.add(dir+"log.txt", o.text([]byte(strings.Join(lt.GetLines(), "\n")+"\n")))
	}
	cancel()
	return d
}

// profile fetches one profile. A node refuses a CPU profile while another runs in its
// process (someone else profiling it, or several nodes in one process as in kvctl demo):
// then it waits for its turn, for up to MaxBusyWait.
func (o *ZipOptions) profile(ctx context.Context, c kvpb.AdminClient, kind string, seconds int) ([]byte, error) {
	giveUp := time.Now().Add(o.MaxBusyWait)
	for {
		cctx, cancel := context.WithTimeout(ctx, o.Timeout+time.Duration(seconds)*time.Second)
		var buf bytes.Buffer
		err := profile.Fetch(cctx, c, kind, seconds, &buf)
		cancel()
		if err == nil {
			return buf.Bytes(), nil
		}
		if !strings.Contains(err.Error(), "already running") || time.Now().After(giveUp) {
			return nil, err
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (o *ZipOptions) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := o.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	return b, nil
}

// write writes the zip next to o.File and renames it into place.
func (o *ZipOptions) write(top *nodeDump, dumps []*nodeDump) error {
	tmp, err := os.CreateTemp(filepath.Dir(o.File), ".kvctl-debug-*.zip")
	if err != nil {
		return fmt.Errorf("create zip: %w", err)
	}
	defer os.Remove(tmp.Name())
	zw := zip.NewWriter(tmp)
	now := time.Now()
	put := func(name string, data []byte) error {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: now})
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	var summary bytes.Buffer
	all := append([]*nodeDump{top}, dumps...)
	sort.SliceStable(all[1:], func(i, j int) bool { return all[1+i].id < all[1+j].id })
	for _, d := range all {
		for _, e := range d.entries {
			if err := put(e.name, e.data); err != nil {
				return fmt.Errorf("write zip: %w", err)
			}
		}
		if len(d.errs) == 0 {
			continue
		}
		text := o.text([]byte(strings.Join(d.errs, "\n") + "\n"))
		if d != top {
			if err := put("nodes/"+safeName(d.id)+"/errors.txt", text); err != nil {
				return fmt.Errorf("write zip: %w", err)
			}
		}
		fmt.Fprintf(&summary, "%s:\n", d.id)
		for _, l := range strings.Split(strings.TrimSpace(string(text)), "\n") {
			fmt.Fprintf(&summary, "  %s\n", l)
		}
	}
	if summary.Len() == 0 {
		summary.WriteString("no errors\n")
	}
	if err := put("errors.txt", summary.Bytes()); err != nil {
		return fmt.Errorf("write zip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write zip: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write zip: %w", err)
	}
	if err := os.Rename(tmp.Name(), o.File); err != nil {
		return fmt.Errorf("write zip: %w", err)
	}
	return nil
}

func (o *ZipOptions) json(m proto.Message) []byte {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true}.Marshal(m)
	if err != nil {
		return []byte(fmt.Sprintf("encode: %v\n", err))
	}
	if o.Redact {
		b = addrField.ReplaceAll(b, []byte(`"$1": "<redacted>"`))
	}
	return o.text(append(b, '\n'))
}

// Addresses --redact removes: IPv4 with optional port, bracketed IPv6 with port,
// host:port, and the *_addr fields of the JSON documents.
var (
	addrField   = regexp.MustCompile(`"(\w*addr)":\s*"[^"]*"`)
	addrPattern = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b|\[[0-9a-fA-F:.]+\](:\d+)?|\blocalhost:\d+\b`)
)

func (o *ZipOptions) text(b []byte) []byte {
	if !o.Redact {
		return b
	}
	return addrPattern.ReplaceAll(b, []byte("<redacted>"))
}

func safeName(id string) string {
	if id == "" || strings.Trim(id, ".") == "" {
		return "_" + id
	}
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' || r == ' ' {
			return '_'
		}
		return r
	}, id)
}
