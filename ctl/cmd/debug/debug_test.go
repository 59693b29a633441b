package debug

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"go.uber.org/goleak"

	"ringkv/internal/leaktest"

	"ringkv/ctl/cli"
	"ringkv/internal/certtest"
	"ringkv/internal/clustertest"
	"ringkv/node"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaktest.NodeLibraries...)
}

func readZip(t *testing.T, path string) map[string][]byte {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("open zip: %v", err)
	}
	defer zr.Close()
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name] = b
	}
	return files
}

func TestZipWithNodeDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	base := node.DefaultConfig()
	base.Replicas, base.VNodes = 3, 16
	base.ReplicaTimeout, base.DrainTimeout = time.Second, 2*time.Second
	c := clustertest.Start(t, 3, base)
	if err := c.Stop(2); err != nil { // n3 is down
		t.Fatalf("stop n3: %v", err)
	}

	for _, redact := range []bool{false, true} {
		ios, _, _, errOut := cli.Test()
		f := cli.NewFactory(ios)
		f.Addr = c.Node(0).Addrs().GRPC
		defer f.Close()
		file := filepath.Join(t.TempDir(), "debug.zip")
		args := []string{"zip", file, "--cpu-seconds", "1"}
		if redact {
			args = append(args, "--redact")
		}
		cmd := NewCmdDebug(f, nil)
		cmd.SetArgs(args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("kvctl debug %v: %v", args, err)
		}
		files := readZip(t, file)
		for _, name := range []string{"cluster/status.json", "cluster/ring.json", "errors.txt"} {
			if _, ok := files[name]; !ok {
				t.Errorf("redact %v: zip lacks %s", redact, name)
			}
		}
		for _, id := range []string{"n1", "n2"} {
			dir := "nodes/" + id + "/"
			for _, name := range []string{"nodeinfo.json", "ring.json", "stats.json", "metrics.txt", "goroutines.txt", "goroutine.pb.gz", "heap.pb.gz", "cpu.pb.gz"} {
				if len(files[dir+name]) == 0 {
					t.Errorf("redact %v: got no %s%s, want it", redact, dir, name)
				}
			}
			for _, name := range []string{"goroutine.pb.gz", "heap.pb.gz", "cpu.pb.gz"} {
				if _, err := profile.ParseData(files[dir+name]); err != nil {
					t.Errorf("redact %v: parse %s%s: %v", redact, dir, name, err)
				}
			}
			if !bytes.Contains(files[dir+"metrics.txt"], []byte("ringkv_ops_total")) {
				t.Errorf("redact %v: %smetrics.txt lacks ringkv_ops_total", redact, dir)
			}
		}
		if e := string(files["nodes/n3/errors.txt"]); !strings.Contains(e, "node unreachable") {
			t.Errorf("redact %v: nodes/n3/errors.txt: got %q, want a node unreachable entry", redact, e)
		}
		if e := string(files["errors.txt"]); !strings.Contains(e, "n3:") {
			t.Errorf("redact %v: errors.txt: got %q, want an n3 entry", redact, e)
		}
		if _, ok := files["nodes/n3/stats.json"]; ok {
			t.Errorf("redact %v: got stats for the down node n3", redact)
		}
		if !strings.Contains(errOut.String(), "wrote "+file) {
			t.Errorf("redact %v: progress: got %q, want a final wrote line", redact, errOut.String())
		}
		if redact {
			for name, b := range files {
				if strings.HasSuffix(name, ".pb.gz") {
					continue
				}
				if bytes.Contains(b, []byte("127.0.0.1")) {
					t.Errorf("--redact: %s still holds an address", name)
				}
			}
		}
	}
}

func TestZipFlags(t *testing.T) {
	tests := []struct {
		args     []string
		wantErr  string
		wantFile string // a prefix
	}{
		{args: []string{"zip", "x.zip"}, wantFile: "x.zip"},
		{args: []string{"zip", "x.zip", "--redact", "--cpu-seconds", "0"}, wantFile: "x.zip"},
		{args: []string{"zip"}, wantFile: "ringkv-debug-20"}, // a default name
		{args: []string{"zip", "a.zip", "b.zip"}, wantErr: "accepts at most 1 arg"},
		{args: []string{"zip", "x.zip", "--cpu-seconds", "-1"}, wantErr: "--cpu-seconds"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ios, _, _, _ := cli.Test()
			var file string
			cmd := NewCmdDebug(cli.NewFactory(ios), func(o *ZipOptions) error { file = o.File; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %v, want one containing %q", err, tt.wantErr)
			}
			if err == nil && !strings.HasPrefix(file, tt.wantFile) {
				t.Errorf("got file %q, want %q...", file, tt.wantFile)
			}
		})
	}
}

// TestZipOverTLS: against a node with --certs-dir, kvctl debug zip --certs-dir fetches the
// metrics and the goroutine dump from the admin listener over HTTPS with the client
// certificate (over plain HTTP the listener answers nothing usable and both are missing).
func TestZipOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	dir := certtest.Dir(t)
	base := node.DefaultConfig()
	base.InMemory, base.Replicas, base.VNodes, base.CertsDir = true, 1, 8, dir
	c := clustertest.Start(t, 1, base)
	ios, _, _, _ := cli.Test()
	f := cli.NewFactory(ios)
	f.Addr, f.CertsDir = c.Node(0).Addrs().GRPC, dir
	defer f.Close()
	file := filepath.Join(t.TempDir(), "debug.zip")
	cmd := NewCmdDebug(f, nil)
	cmd.SetArgs([]string{"zip", file, "--cpu-seconds", "0"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("kvctl debug zip: %v", err)
	}
	files := readZip(t, file)
	if !bytes.Contains(files["nodes/n1/metrics.txt"], []byte("ringkv_ops_total")) || len(files["nodes/n1/goroutines.txt"]) == 0 {
		t.Errorf("zip over TLS: metrics.txt %d bytes, goroutines.txt %d bytes, errors %q; want both from the admin listener",
			len(files["nodes/n1/metrics.txt"]), len(files["nodes/n1/goroutines.txt"]), files["nodes/n1/errors.txt"])
	}
}
