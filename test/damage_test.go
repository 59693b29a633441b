package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/proto/kvpb"
)

// TestDamageRefusedOrRecovered: each kind of damage made to a stopped kvnode's data
// directory — MANIFEST deleted or truncated, an .sst with flipped bytes or truncated to half,
// the write-ahead log (.mem) truncated after a kill -9 — makes kvnode refuse to start with a
// one-line message and exit 1 (no panic, no node serving fewer keys as if whole); with
// --recover it starts and NodeInfo says what was damaged.
func TestDamageRefusedOrRecovered(t *testing.T) {
	bin := buildBins(t).kvnode
	const keys = 3000
	for _, tc := range []struct {
		name   string
		kill   bool // stopped by kill -9 rather than SIGINT
		damage func(t *testing.T, dir string)
	}{
		{name: "manifest deleted", damage: func(t *testing.T, dir string) { must(t, os.Remove(filepath.Join(dir, "MANIFEST"))) }},
		{name: "manifest truncated", damage: func(t *testing.T, dir string) { truncate(t, filepath.Join(dir, "MANIFEST"), 3) }},
		{name: "sst bytes flipped", damage: func(t *testing.T, dir string) {
			p := largest(t, dir, ".sst")
			b, err := os.ReadFile(p)
			must(t, err)
			for i := len(b) / 2; i < len(b)/2+64; i++ {
				b[i] ^= 0xff
			}
			must(t, os.WriteFile(p, b, 0o644))
		}},
		{name: "sst truncated", damage: func(t *testing.T, dir string) { truncate(t, largest(t, dir, ".sst"), 2) }},
		// The .mem file is preallocated (64 MiB); the 3,000 records fill its first ~4 MiB.
		{name: "mem truncated", kill: true, damage: func(t *testing.T, dir string) { must(t, os.Truncate(largest(t, dir, ".mem"), 1<<20)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "n1")
			p := startOne(t, bin, dir)
			fill(t, p, keys)
			waitFor(t, 10*time.Second, "the store's marks record the keys", func() error {
				b, err := os.ReadFile(filepath.Join(dir, "RINGKV-MARKS"))
				if err != nil {
					return err
				}
				var m struct{ Keys int64 }
				if err := json.Unmarshal(b, &m); err != nil {
					return err
				}
				if m.Keys < keys {
					return fmt.Errorf("got %d keys, want %d", m.Keys, keys)
				}
				return nil
			})
			if tc.kill {
				must(t, p.cmd.Process.Kill())
				err := <-p.done
				p.done <- err
			} else {
				stopProc(t, p)
			}
			tc.damage(t, dir)

			p.start(t, bin, "n1="+p.grpc)
			var err error
			select {
			case err = <-p.done:
				p.done <- err
			case <-time.After(30 * time.Second):
				t.Fatalf("kvnode started on damaged data, want a refusal\n%s", tail(p.log, 20))
			}
			out := p.log.String()
			line := ""
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "kvnode: ") {
					line = l
				}
			}
			if code := p.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(line, "data damaged") || strings.Contains(out, "goroutine ") {
				t.Fatalf("start on damaged data: got exit %d, message %q, want exit 1 and a one-line \"data damaged\" message without a panic's stack\n%s", code, line, tail(p.log, 30))
			}
			t.Logf("refused: %s", line)

			p.flags = append(p.flags, "--recover")
			p.start(t, bin, "n1="+p.grpc)
			waitStatus(t, p, http.StatusOK)
			cc, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
			must(t, err)
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			info, err := kvpb.NewAdminClient(cc).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
			if err != nil || info.GetDataDamage() == "" {
				t.Fatalf("NodeInfo after --recover: got data_damage %q (%v), want what was found", info.GetDataDamage(), err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// truncate cuts the file at path to 1/div of its size.
func truncate(t *testing.T, path string, div int64) {
	t.Helper()
	fi, err := os.Stat(path)
	must(t, err)
	must(t, os.Truncate(path, fi.Size()/div))
}

// largest is the largest file in dir with the extension ext.
func largest(t *testing.T, dir, ext string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
	best, size := "", int64(-1)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Size() > size {
			best, size = f, fi.Size()
		}
	}
	if best == "" {
		t.Fatalf("no %s file in %s", ext, dir)
	}
	return best
}

// fill writes n 1 KiB values through p's HTTP API, 8 at a time.
func fill(t *testing.T, p *proc, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				key := fmt.Sprintf("d%05d", i)
				code, body, err := request("PUT", fmt.Sprintf("http://%s/v0/entity?id=%s", p.http, key), []byte(strings.Repeat(key, 170)))
				if err != nil || code != http.StatusCreated {
					errs <- fmt.Errorf("PUT %s: got %d %q (%v), want 201", key, code, body, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
