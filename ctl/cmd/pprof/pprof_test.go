package pprof

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	pprofile "github.com/google/pprof/profile"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/ctl/cli"
	"ringkv/ctl/profile"
	"ringkv/internal/clustertest"
	"ringkv/internal/leaktest"
	"ringkv/internal/spin"
	"ringkv/node"
	"ringkv/proto/kvpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaktest.NodeLibraries...)
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args    []string
		want    Options
		wantErr string
	}{
		{args: []string{"cpu"}, want: Options{Kind: "cpu", Dir: "."}},
		{args: []string{"heap", "--all", "-d", "/tmp/p", "--top", "5"}, want: Options{Kind: "heap", All: true, Dir: "/tmp/p", Top: 5}},
		{args: []string{"mutex", "--node", "n2", "--seconds", "3", "--dir", "x"}, want: Options{Kind: "mutex", NodeID: "n2", Seconds: 3, Dir: "x"}},
		{args: []string{"threads"}, wantErr: "profile kind"},
		{args: []string{"cpu", "--seconds", "301"}, wantErr: "--seconds"},
		{args: []string{"trace", "--top", "3"}, wantErr: "--top"},
		{args: []string{"cpu", "--node", "n1", "--all"}, wantErr: "none of the others"},
		{args: []string{}, wantErr: "accepts 1 arg"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ios, _, _, _ := cli.Test()
			var got *Options
			cmd := NewCmdPprof(cli.NewFactory(ios), func(o *Options) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			g := *got
			g.IO, g.Factory, g.Timeout = nil, nil, 0
			if !reflect.DeepEqual(g, tt.want) {
				t.Errorf("got options %+v, want %+v", g, tt.want)
			}
		})
	}
}

// cluster is a 3-node in-process cluster with a cluster secret.
type cluster struct {
	*node.LocalCluster
	secretFile string
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := node.DefaultConfig()
	base.Replicas, base.VNodes = 3, 16
	base.ReplicaTimeout, base.DrainTimeout = time.Second, 2*time.Second
	base.ClusterSecretFile = secretFile
	c := clustertest.Start(t, 3, base)
	return &cluster{LocalCluster: c, secretFile: secretFile}
}

// factory returns a kvctl factory aimed at node i, with the secret unless noSecret.
func (c *cluster) factory(t *testing.T, i int, noSecret bool) (*cli.Factory, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	ios, _, out, errOut := cli.Test()
	f := cli.NewFactory(ios)
	f.Addr = c.Node(i).Addrs().GRPC
	if !noSecret {
		f.SecretFile = c.secretFile
	}
	t.Cleanup(f.Close)
	return f, out, errOut
}

// load writes and reads keys through every node until stop is closed.
func (c *cluster) load(t *testing.T, f *cli.Factory, stop <-chan struct{}) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	for i := range c.Len() {
		kv, err := f.KV(c.Node(i).Addrs().GRPC)
		if err != nil {
			t.Fatal(err)
		}
		for w := range 2 {
			wg.Go(func() {
				val := bytes.Repeat([]byte("v"), 512)
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					key := fmt.Appendf(nil, "load-%d-%d-%d", i, w, n%500)
					kv.Put(ctx, &kvpb.PutRequest{Key: key, Value: val})
					kv.Get(ctx, &kvpb.GetRequest{Key: key})
					cancel()
				}
			})
		}
	}
	return &wg
}

func kvctl(t *testing.T, f *cli.Factory, args ...string) error {
	t.Helper()
	cmd := NewCmdPprof(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	return cmd.ExecuteContext(context.Background())
}

func parseFile(t *testing.T, path string) *pprofile.Profile {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	p, err := pprofile.Parse(fh)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return p
}

func functionsWithPrefix(p *pprofile.Profile, prefix string) int {
	n := 0
	for _, s := range p.Sample {
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if l.Function != nil && strings.HasPrefix(l.Function.Name, prefix) {
					n++
				}
			}
		}
	}
	return n
}

func TestCaptureFromCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster and profiles it")
	}
	c := startCluster(t)
	f, out, _ := c.factory(t, 0, false)
	stop := make(chan struct{})
	wg := c.load(t, f, stop)
	defer func() { close(stop); wg.Wait() }()

	// One CPU profile of n2 under load, with --top.
	dir := t.TempDir()
	if err := kvctl(t, f, "cpu", "--node", "n2", "--seconds", "2", "--top", "10", "-d", dir); err != nil {
		t.Fatalf("kvctl pprof cpu: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "n2-cpu-*.pb.gz"))
	if len(files) != 1 {
		t.Fatalf("got files %v, want one n2-cpu-*.pb.gz", files)
	}
	p := parseFile(t, files[0])
	if len(p.Sample) == 0 || functionsWithPrefix(p, "ringkv/node/") == 0 {
		t.Errorf("cpu profile: got %d samples, %d frames in ringkv/node/, want both > 0", len(p.Sample), functionsWithPrefix(p, "ringkv/node/"))
	}
	if !strings.Contains(out.String(), "FLAT") || !strings.Contains(out.String(), "n2 cpu: top 10") {
		t.Errorf("--top output: got %q, want a top table for n2", out.String())
	}

	// Heap, goroutine and mutex profiles from every node. The three nodes share this process
	// (as in kvctl demo), and a runtime profile is the process's: one capture, labelled.
	for _, kind := range []string{"heap", "goroutine", "mutex"} {
		dir := t.TempDir()
		out.Reset()
		stopContend := func() {}
		if kind == "mutex" {
			// The runtime samples one contention event in 5 during a capture. On a CI machine
			// busy with other packages the cluster's own load can go a whole second without
			// five, so contention of known size runs in this process, which is the nodes'.
			stop, done := make(chan struct{}), make(chan struct{})
			go func() { spin.Contend(stop, 100*time.Microsecond, nil); close(done) }()
			stopContend = func() { close(stop); <-done }
		}
		err := kvctl(t, f, kind, "--all", "--seconds", "1", "-d", dir)
		stopContend()
		if err != nil {
			t.Fatalf("kvctl pprof %s --all: %v", kind, err)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
		if len(files) != 1 || !strings.HasPrefix(filepath.Base(files[0]), "n1+n2+n3-"+kind+"-") {
			t.Fatalf("%s: got files %v, want one n1+n2+n3-%s-*.pb.gz", kind, files, kind)
		}
		p := parseFile(t, files[0])
		if kind != "heap" && len(p.Sample) == 0 {
			t.Errorf("%s: got no samples", kind)
		}
		if kind == "goroutine" && functionsWithPrefix(p, "ringkv/node/") == 0 {
			t.Errorf("goroutine profile: got no ringkv/node/ frames")
		}
		if !strings.Contains(out.String(), "n1+n2+n3") {
			t.Errorf("%s: got %q, want the capture labelled n1+n2+n3", kind, out.String())
		}
	}

	// The bench engineer's entry point, with a prefix: one node for the process, so the CPU
	// profile, which the runtime allows once at a time, is not refused on two of three.
	nodes, err := profile.ResolveNodes(context.Background(), f, "", true)
	if err != nil || len(nodes) != 1 || nodes[0].Label() != "n1+n2+n3" {
		t.Fatalf("ResolveNodes --all: got %v, %v, want one node n1+n2+n3", nodes, err)
	}
	dir = t.TempDir()
	var all []string
	for range 2 {
		// Twice with the same names: the second run must not overwrite the first's files.
		got, err := profile.Capture(context.Background(), f, nodes, []string{"cpu", "heap"}, 1, dir, "bench-run1")
		if err != nil || len(got) != 2 {
			t.Errorf("Capture: got files %v, %v, want a cpu and a heap profile", got, err)
		}
		all = append(all, got...)
	}
	files, _ = filepath.Glob(filepath.Join(dir, "bench-run1-*"))
	if len(files) != 4 || len(all) != 4 {
		t.Errorf("got files %v on disk, %v returned; want 4 (-2 for the second run)", files, all)
	}
	for _, g := range all {
		if !strings.HasPrefix(filepath.Base(g), "bench-run1-n1+n2+n3-") {
			t.Errorf("got file %s, want prefix bench-run1-n1+n2+n3-", g)
		}
		parseFile(t, g)
	}
}

func TestAdminSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := startCluster(t)
	wrong := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrong, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		secretFile string
		want       []codes.Code
	}{
		{"no secret", "", []codes.Code{codes.Unauthenticated}},
		{"wrong secret", wrong, []codes.Code{codes.PermissionDenied}},
		{"cluster secret", c.secretFile, []codes.Code{codes.OK}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _, _ := c.factory(t, 1, true)
			f.SecretFile = tt.secretFile
			admin, err := f.Admin("")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = admin.Stats(ctx, &kvpb.StatsRequest{})
			if got := status.Code(err); got != tt.want[0] {
				t.Errorf("Stats: got %v (%v), want %v", got, err, tt.want[0])
			}
			var buf bytes.Buffer
			err = profile.Fetch(ctx, admin, "heap", 0, &buf)
			if got := status.Code(err); got != tt.want[0] {
				t.Errorf("Profile: got %v (%v), want %v", got, err, tt.want[0])
			}
			err = kvctl(t, f, "goroutine", "-d", t.TempDir())
			if (err == nil) != (tt.want[0] == codes.OK) {
				t.Errorf("kvctl pprof goroutine: got %v, want success %v", err, tt.want[0] == codes.OK)
			}
		})
	}
}
