package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"ringkv/internal/damagetest"
	"ringkv/proto/kvpb"
)

// TestDamageRefusedOrRecovered: each kind of damage made to a stopped kvnode's data
// directory — MANIFEST deleted or truncated, an .sst with flipped bytes or truncated to half,
// the write-ahead log (.mem) truncated after a kill -9, a value log with flipped bytes — makes
// kvnode refuse to start with a one-line message and exit 1 (no panic, no node serving fewer
// keys as if whole); with --recover it starts and NodeInfo says what was damaged.
func TestDamageRefusedOrRecovered(t *testing.T) {
	t.Parallel()
	bin := buildBins(t).kvnode
	const keys = 3000
	for _, tc := range damageKinds {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "n1")
			p := startOne(t, bin, dir, tc.flags...)
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

// damageKinds are the kinds of damage made to a stopped node's data directory, by
// TestDamageRefusedOrRecovered and TestDamagedRangesRepairedFromPeers.
var damageKinds = []struct {
	name   string
	kill   bool     // stopped by kill -9 rather than a clean stop
	flags  []string // kvnode's flags besides startOne's
	damage func(t *testing.T, dir string)
}{
	{name: "manifest deleted", damage: func(t *testing.T, dir string) { damagetest.RemoveManifest(t, dir) }},
	{name: "manifest truncated", damage: func(t *testing.T, dir string) { damagetest.TruncateManifest(t, dir) }},
	{name: "sst bytes flipped", damage: func(t *testing.T, dir string) { damagetest.FlipBytes(t, damagetest.Largest(t, dir, ".sst"), 2) }},
	{name: "sst truncated", damage: func(t *testing.T, dir string) { damagetest.TruncateTable(t, dir) }},
	{name: "mem truncated", kill: true, damage: func(t *testing.T, dir string) { must(t, os.Truncate(damagetest.Largest(t, dir, ".mem"), 1<<20)) }},
	// fill's 1 KiB values in the value log, then bytes flipped in its middle.
	{name: "vlog bytes flipped", flags: []string{"--value-threshold", "1K"}, damage: func(t *testing.T, dir string) { damagetest.FlipBytes(t, damagetest.Largest(t, dir, ".vlog"), 2) }},
}

// TestDamagedRangesRepairedFromPeers: damaged ranges repaired from the peers, end to end, with kvnode processes, 3
// nodes, RF=3, hints off (so a replica that was down misses writes until repaired):
//   - 1,500 keys written with ack=3; n2 stopped; 500 more with ack=2 (held by n1 and n3
//     only); n3 stopped, its store damaged (each kind), restarted with --recover while n2 is
//     still down: NodeInfo, /readyz and kvctl status say its ranges are damaged, awaiting
//     repair, and they stay marked across a restart (the repair cannot run without n2);
//   - quorum reads (ack=2) through every node never report an acknowledged key missing or
//     stale, from then on: n3's damaged copy does not count;
//   - n1 stopped and n2 back: reads of those 500 through n3 and n2 are 504s, never "not
//     found" (without the rule, n3 + n2 answer "not found");
//   - n1 back, n3 repairs its ranges from the peers by itself: the marks clear within a
//     bounded time, and then n3's and n2's own stores hold every acknowledged key (a scan of
//     each store, no client reads).
//
// The marks, the read rule and the repair do not depend on the kind of damage (every kind
// marks the whole token space; TestDamageRefusedOrRecovered covers each kind's detection), so
// two kinds run here: one where badger lost its table index and one where a table is bad.
// Each takes ~60 s of three processes; all five took 396 s.
func TestDamagedRangesRepairedFromPeers(t *testing.T) {
	long(t)
	t.Parallel()
	for _, tc := range damageKinds {
		if tc.name != "manifest deleted" && tc.name != "sst bytes flipped" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := startClusterFlags(t, 3, 0, []string{"--max-hint-bytes", "1"})
			n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
			acked := map[string]string{}
			var mu sync.Mutex
			put := func(prefix string, n, ack int) {
				var wg sync.WaitGroup
				for w := range 8 {
					wg.Go(func() {
						for i := w; i < n; i += 8 {
							key := fmt.Sprintf("%s%05d", prefix, i)
							val := key + strings.Repeat("v", 1000)
							ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
							_, err := c.kv(n1).Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte(val), Ack: uint32(ack), From: 3})
							cancel()
							if err == nil {
								mu.Lock()
								acked[key] = val
								mu.Unlock()
							}
						}
					})
				}
				wg.Wait()
			}
			put("a", 1500, 3)
			stop(c, n2)
			put("b", 500, 2)
			if len(acked) < 1900 {
				t.Fatalf("%d of 2000 writes acknowledged, want nearly all", len(acked))
			}
			waitFor(t, 10*time.Second, "n3's store marks record the keys", func() error {
				b, err := os.ReadFile(filepath.Join(n3.dir, "RINGKV-MARKS"))
				if err != nil {
					return err
				}
				var m struct{ Keys int }
				if err := json.Unmarshal(b, &m); err != nil {
					return err
				}
				if m.Keys < len(acked) {
					return fmt.Errorf("got %d keys, want %d", m.Keys, len(acked))
				}
				return nil
			})
			if tc.kill {
				c.kill(n3)
			} else {
				stop(c, n3)
			}
			tc.damage(t, n3.dir)
			n3.flags = append(slices.Clone(n3.flags), "--recover")
			c.restart(n3)
			c.waitUp(n3)

			// n2 down: the marks cannot be repaired and stay, also across a restart.
			damaged := func() uint32 {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				info, err := c.admin(n3).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
				must(t, err)
				return info.GetDamagedRanges()
			}
			for round := range 2 {
				if got := damaged(); got == 0 {
					t.Fatalf("round %d: n3's NodeInfo damaged_ranges 0 after --recover, want its ranges marked", round)
				}
				// Once its first connections are made (until then it says so).
				waitFor(t, 30*time.Second, "n3 /readyz", func() error {
					code, body, err := request("GET", "http://"+n3.admin+"/readyz", nil)
					if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "ranges damaged, awaiting repair") {
						return fmt.Errorf("round %d: got %d %q (%v), want 503 naming the damaged ranges", round, code, body, err)
					}
					return nil
				})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				st := c.kvctl(ctx, n3, "status")
				cancel()
				if !strings.Contains(st.stdout, "DATA DAMAGED: ") || !strings.Contains(st.stdout, "ranges damaged, awaiting repair") {
					t.Fatalf("round %d: kvctl status: got\n%s\n%s\nwant n3 DATA DAMAGED with its damaged ranges", round, st.stdout, st.stderr)
				}
				// Reads meanwhile: n3's copy does not answer and n2 is down, so a read with
				// ack=2 is a 504 (n1 alone), never "not found".
				missing := quorumReads(c, []*proc{n3, n1}, acked, 20)
				if missing != "" {
					t.Fatalf("round %d, n2 down: %s", round, missing)
				}
				if round == 0 {
					stop(c, n3)
					n3.flags = slices.DeleteFunc(slices.Clone(n3.flags), func(f string) bool { return f == "--recover" })
					c.restart(n3)
					c.waitUp(n3)
				}
			}

			// n1 down, n2 back: only n2, which missed the "b" keys, and n3's damaged copy
			// are up. A read of a "b" key is a 504, never "not found" (were n3's copy
			// counted, n3 + n2 would answer "not found"). The repair cannot run without n1.
			stop(c, n1)
			c.restart(n2)
			c.waitUp(n2)
			onlyB := map[string]string{}
			for k, v := range acked {
				if strings.HasPrefix(k, "b") && len(onlyB) < 50 {
					onlyB[k] = v
				}
			}
			if m := quorumReads(c, []*proc{n3, n2}, onlyB, 0); m != "" {
				t.Fatalf("n1 down, n2 back: %s", m)
			}
			if got := damaged(); got == 0 {
				t.Fatalf("n1 down: n3's damaged ranges cleared without a repair")
			}

			// n1 back: n3 repairs by itself; reads never miss meanwhile.
			c.restart(n1)
			c.waitUp(n1)
			back := time.Now()
			done := make(chan struct{})
			readErr := make(chan string, 1)
			go func() {
				defer close(readErr)
				for {
					if m := quorumReads(c, []*proc{n3, n1, n2}, acked, 0); m != "" {
						readErr <- m
						return
					}
					select {
					case <-done:
						return
					default:
					}
				}
			}()
			waitFor(t, 120*time.Second, "n3's damaged ranges repaired", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				info, err := c.admin(n3).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
				if err != nil {
					return err
				}
				if info.GetDamagedRanges() != 0 || info.GetDataDamage() != "" {
					return fmt.Errorf("%d ranges damaged, data_damage %q", info.GetDamagedRanges(), info.GetDataDamage())
				}
				return nil
			})
			t.Logf("n3's damaged ranges repaired %s after n1 was back", time.Since(back).Round(100*time.Millisecond))
			close(done)
			if m := <-readErr; m != "" {
				t.Fatalf("n2 back, while n3 repaired: %s", m)
			}
			if m := quorumReads(c, []*proc{n3, n1, n2}, acked, 0); m != "" {
				t.Fatalf("after the repair: %s", m)
			}
			for _, p := range []*proc{n3, n2} {
				miss, err := c.missingOn(p, acked)
				must(t, err)
				if miss != 0 {
					t.Fatalf("after the repair, %s's own store misses %d of %d acknowledged keys, want 0", p.id, miss, len(acked))
				}
			}
			if code, body, _ := request("GET", "http://"+n3.admin+"/readyz", nil); code != http.StatusOK {
				t.Fatalf("n3 /readyz after the repair: got %d %q, want 200", code, body)
			}
		})
	}
}

// stop sends SIGTERM to p and waits for it to exit cleanly.
func stop(c *tcluster, p *proc) {
	c.t.Helper()
	must(c.t, p.cmd.Process.Signal(syscall.SIGTERM))
	if err := <-p.done; err != nil {
		c.t.Fatalf("%s exited with %v after SIGTERM, want 0\n%s", p.id, err, tail(p.log, 30))
	}
	c.mu.Lock()
	c.alive[p] = false
	c.mu.Unlock()
}

// quorumReads reads acknowledged keys with ack=2 through each of nodes in turn, the first
// node first (every key when sample is 0, else sample of them), 16 keys at a time; it says
// which answers reported a key missing or stale ("" when none did). Errors (a 504 when too
// few replicas can answer honestly, after the replica timeout) are not answers and are only
// counted.
func quorumReads(c *tcluster, nodes []*proc, acked map[string]string, sample int) string {
	type read struct{ key, want string }
	reads := make(chan read)
	var mu sync.Mutex
	bad, errs, n := 0, 0, 0
	first := ""
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for r := range reads {
				for _, p := range nodes {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					resp, err := c.kv(p).Get(ctx, &kvpb.GetRequest{Key: []byte(r.key), Ack: 2, From: 3})
					cancel()
					why := ""
					switch {
					case status.Code(err) == codes.NotFound:
						why = "not found"
					case err != nil:
					case string(resp.GetValue()) != r.want:
						why = "a stale value"
					}
					mu.Lock()
					switch {
					case why != "":
						bad++
						if first == "" {
							first = fmt.Sprintf("GET %s through %s: %s", r.key, p.id, why)
						}
					case err != nil:
						errs++
					}
					mu.Unlock()
				}
			}
		})
	}
	for key, want := range acked {
		if sample > 0 && n >= sample {
			break
		}
		n++
		reads <- read{key, want}
	}
	close(reads)
	wg.Wait()
	if bad == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d quorum reads reported an acknowledged key missing or stale (%d errors); first: %s", bad, n*len(nodes), errs, first)
}
