package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ringkv/ctl/cli"
	"ringkv/internal/certtest"
	"ringkv/internal/clustertest"
	"ringkv/loadgen"
	"ringkv/node"
	"ringkv/proto/kvpb"
)

// TestBenchRecordCheckOverTLS: against a 3-node cluster with --certs-dir, kvctl bench
// --certs-dir loads the HTTP API over HTTPS (and the gRPC API) with ack=2 writes and quorum
// reads, --record keeps every acknowledged write, and bench check reads them all back at a
// quorum: 0 lost. A write overwritten behind bench's back, and one deleted, are then
// reported lost (exit 1). Without --certs-dir the HTTP target fails.
func TestBenchRecordCheckOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	dir := certtest.Dir(t)
	base := node.DefaultConfig()
	base.InMemory, base.Replicas, base.VNodes, base.CertsDir = true, 3, 16, dir
	c := clustertest.Start(t, 3, base)
	ios, _, out, _ := cli.Test()
	f := cli.NewFactory(ios)
	f.Addr, f.CertsDir = c.Node(0).Addrs().GRPC, dir
	t.Cleanup(f.Close)

	rec := filepath.Join(t.TempDir(), "acked.jsonl")
	var puts int64 // acknowledged PUTs as the reports count them
	for _, target := range []string{"http", "grpc"} {
		js := run(t, f, out, "--target", target, "--rate", "300", "--duration", "1s", "--warmup", "0s", "--max-lag", "10s",
			"-c", "4", "--keys", "1000000", "--key-prefix", target+":", "--key-dist", "sequential",
			"--workload", "mixed:get=50,put=50", "--ack", "2", "--from", "3", "--record", rec, "--max-errors", "0", "--json", "--quiet")
		var rep loadgen.Report
		if err := json.Unmarshal([]byte(js), &rep); err != nil {
			t.Fatalf("%s: decode --json: %v\n%s", target, err, js)
		}
		var errs int64
		for _, n := range rep.Errors {
			errs += n
		}
		puts += rep.Successes - rep.NotFound
		if !strings.HasPrefix(rep.Target, map[string]string{"http": "https ", "grpc": "grpc "}[target]) || rep.Successes == 0 || errs != 0 {
			t.Errorf("%s: got target %q, %d successes, errors %v; want https/grpc, > 0, none", target, rep.Target, rep.Successes, rep.Errors)
		}
	}
	keys, writes, err := readRecords(rec)
	if err != nil {
		t.Fatal(err)
	}
	if writes < 10 || len(keys) != writes || int64(writes) != puts {
		b, _ := os.ReadFile(rec)
		t.Fatalf("--record: %d writes of %d keys, want >= 10 writes, one per key, %d as the reports count\n%s", writes, len(keys), puts, b)
	}

	check := func(args ...string) (string, error) {
		out.Reset()
		cmd := NewCmdBench(f, nil)
		cmd.SetArgs(append([]string{"check", rec, "--ack", "2", "--from", "3"}, args...))
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	got, err := check()
	if err != nil || !strings.Contains(got, " 0 lost, 0 unreadable") {
		t.Fatalf("bench check: got %v\n%s\nwant 0 lost", err, got)
	}

	// Lose two acknowledged writes behind bench's back: one overwritten, one deleted.
	kv, err := f.KV("")
	if err != nil {
		t.Fatal(err)
	}
	var victims []string
	for k := range keys {
		victims = append(victims, k)
		if len(victims) == 2 {
			break
		}
	}
	ctx := context.Background()
	if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: []byte(victims[0]), Value: []byte("not bench's"), Ack: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Delete(ctx, &kvpb.DeleteRequest{Key: []byte(victims[1]), Ack: 3}); err != nil {
		t.Fatal(err)
	}
	got, err = check()
	if !errors.Is(err, ErrLostWrites) || cli.ExitCode(err) != cli.ExitFailure || !strings.Contains(got, " 2 lost,") {
		t.Errorf("bench check after losing 2: got %v (exit %d)\n%s\nwant %v, exit 1, 2 lost", err, cli.ExitCode(err), got, ErrLostWrites)
	}
	for _, v := range victims {
		if !strings.Contains(got, "lost: "+v) {
			t.Errorf("bench check does not name %s:\n%s", v, got)
		}
	}

	// The HTTP target without --certs-dir speaks plain HTTP to an HTTPS port: every request fails.
	f2 := cli.NewFactory(ios)
	f2.Addr = f.Addr
	t.Cleanup(f2.Close)
	cmd := NewCmdBench(f2, nil)
	cmd.SetArgs([]string{"--target", "http", "--http", c.Config(0).HTTPAddr, "--rate", "50", "--duration", "1s", "--warmup", "0s", "--quiet", "-c", "1"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.ExecuteContext(ctx); !errors.Is(err, ErrInvalidResult) {
		t.Errorf("plain HTTP bench of an HTTPS node: got %v, want %v", err, ErrInvalidResult)
	}
	_ = os.Remove(rec)
}
