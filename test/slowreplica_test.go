package test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ringkv/ctl/oncall"
	"ringkv/loadgen"
	"ringkv/proto/kvpb"
)

// vnodesOf runs kvctl vnodes -o json --sort p99 against p.
func (c *tcluster) vnodesOf(p *proc) *oncall.Vnodes {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := c.kvctl(ctx, p, "vnodes", "-o", "json", "--sort", "p99")
	if r.code != 0 {
		c.t.Fatalf("kvctl vnodes: exit %d\n%s", r.code, r.stderr)
	}
	var v oncall.Vnodes
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		c.t.Fatalf("kvctl vnodes json: %v\n%.500s", err, r.stdout)
	}
	return &v
}

// named returns the vnodes whose slowest replica is id, and those naming another.
func named(v *oncall.Vnodes, id string) (mine, others []string) {
	for _, x := range v.Vnodes {
		switch x.SlowestReplica {
		case "":
		case id:
			mine = append(mine, x.Vnode)
		default:
			others = append(others, x.Vnode+"="+x.SlowestReplica)
		}
	}
	return mine, others
}

// servedBy counts the vnodes id serves, and those of them that name it their slowest replica.
func servedBy(v *oncall.Vnodes, id string) (served, servedNamed int) {
	for _, x := range v.Vnodes {
		if slices.Contains(x.Replicas, id) {
			served++
			if x.SlowestReplica == id {
				servedNamed++
			}
		}
	}
	return served, servedNamed
}

// replicaCalls lists the calls to each replica of the vnodes id serves: calls, p50, p99.
func replicaCalls(v *oncall.Vnodes, id string) string {
	var b strings.Builder
	for _, x := range v.Vnodes {
		if !slices.Contains(x.Replicas, id) {
			continue
		}
		fmt.Fprintf(&b, "  %s on %v, named %q:", x.Vnode, x.Replicas, x.SlowestReplica)
		for _, r := range x.ReplicaLatency {
			fmt.Fprintf(&b, " %s %d calls p50 %v p99 %v;", r.Node, r.Calls, ptr(r.P50Ms), ptr(r.P99Ms))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestSlowReplicaNamed: one replica stopped in 50 ms pulses every 100 ms, under a constant-rate
// load through the two others, is named the slowest replica of the vnodes it serves (and no
// other is), those vnodes rank first by p99, kvctl status names it slow for the others; once
// the pulses stop the attribution clears within a window and a slice; no acknowledged write is
// lost.
func TestSlowReplicaNamed(t *testing.T) {
	long(t)
	// Replication 2 over 3 nodes: a third of the vnodes do without n3 (the control group),
	// and every write waits for both replicas, so a slow one shows in its vnodes' p99.
	c := startClusterFlags(t, 3, 0, []string{"--replicas", "2", "--vnodes", "8"})
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	via := []*proc{n1, n2}
	const prior, size = 200, 64
	c.load(via, prior, size, 4)

	// The constant-rate load, through n1 and n2 only (a stopped coordinator would make every
	// vnode slow), and a writer whose acknowledged writes are checked at the end.
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	cfg := loadgen.DefaultConfig()
	cfg.Rate, cfg.Duration, cfg.Connections = 250, 5*time.Minute, 16
	cfg.Workload = loadgen.Mix{Get: 50, Put: 50}
	cfg.Keys, cfg.KeyPrefix, cfg.Timeout = 2000, "rate-", 3*time.Second
	target := loadgen.NewGRPCTarget([]kvpb.KVClient{c.kv(n1), c.kv(n2)}, 0, 0)
	var loadWG sync.WaitGroup
	loadWG.Go(func() {
		if _, err := loadgen.Run(ctx, cfg, target); err != nil && ctx.Err() == nil {
			t.Errorf("loadgen: %v", err)
		}
	})
	// Paced: unpaced, its calls made while n3 runs outnumbered those a stop held up, and kept
	// n3's p90 under the floor on a quiet machine (n3 named on 4 of its 16 vnodes, p99 52 ms
	// on all 16).
	tr := c.startTrafficPaced(via, 2, prior, size, 20*time.Millisecond)

	// Pulses: n3 stopped 50 ms of every 100 ms.
	pulsesFrom := time.Now()
	pulsing, stopPulses := context.WithCancel(context.Background())
	var pulseWG sync.WaitGroup
	pulseWG.Go(func() {
		defer n3.cmd.Process.Signal(syscall.SIGCONT)
		for pulsing.Err() == nil {
			n3.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(50 * time.Millisecond)
			n3.cmd.Process.Signal(syscall.SIGCONT)
			time.Sleep(50 * time.Millisecond)
		}
	})
	defer func() { stopPulses(); pulseWG.Wait() }()

	// Two complete slices of pulses fill the window; poll until they do and the attribution
	// shows. (A window that began before the pulses holds too few calls to judge most vnodes.)
	var v *oncall.Vnodes
	deadline := time.Now().Add(45 * time.Second)
	for {
		time.Sleep(2 * time.Second)
		v = c.vnodesOf(n1)
		full := !v.End.Add(-time.Duration(v.WindowSeconds) * time.Second).Before(pulsesFrom)
		// The same "most" as asserted below: a poll that stopped at a handful named ended the
		// wait while the window was still filling (4 of 16 once, on a quiet machine).
		if served, servedNamed := servedBy(v, "n3"); full && 2*servedNamed >= served || time.Now().After(deadline) {
			break
		}
	}
	mine, others := named(v, "n3")
	served, servedNamed := servedBy(v, "n3")
	t.Logf("n3 named on %d of the %d vnodes it serves (of %d); others named: %v", servedNamed, served, len(v.Vnodes), others)
	if len(others) > 0 {
		t.Errorf("slowest replica: got %v, want only n3 named", others)
	}
	if 2*servedNamed < served || len(mine) != servedNamed {
		t.Errorf("slowest replica: n3 named on %d of the %d vnodes it serves (and %d in all), want most of them and no other; its vnodes' calls per replica:\n%s",
			servedNamed, served, len(mine), replicaCalls(v, "n3"))
	}
	// The vnodes without n3 rank after those with it by p99. The rows come sorted, the worse of
	// read and write p99 first; the vnodes with n3 hold most of the first rows (as many as there
	// are vnodes without it). A p99 of ~150 operations is a vnode's two slowest, so one stall of
	// a process on a busy machine puts any vnode up there: at most a quarter of those rows may
	// be without n3 (a fresh-clone CI beside other tests, and one run in four under two spin
	// loops, had two of eight at 55–82 ms), and by the median the vnodes with n3 are slower.
	worse := func(x oncall.Vnode) float64 {
		w := -1.0
		for _, p := range []*float64{x.ReadP99Ms, x.WriteP99Ms} {
			if p != nil {
				w = max(w, *p)
			}
		}
		return w
	}
	control := len(v.Vnodes) - served
	var intruders []string
	var withN3, without []float64
	for i, x := range v.Vnodes {
		if i > 0 && worse(x) > worse(v.Vnodes[i-1]) {
			t.Errorf("--sort p99: row %d (%v ms) above row %d (%v ms)", i-1, worse(v.Vnodes[i-1]), i, worse(x))
		}
		if slices.Contains(x.Replicas, "n3") {
			withN3 = append(withN3, worse(x))
			continue
		}
		without = append(without, worse(x))
		if i < control {
			intruders = append(intruders, fmt.Sprintf("row %d: vnode %s on %v (read p99 %v, write p99 %v)", i, x.Vnode, x.Replicas, ptr(x.ReadP99Ms), ptr(x.WriteP99Ms)))
		}
	}
	median := func(xs []float64) float64 {
		if len(xs) == 0 {
			return -1
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	t.Logf("by p99: %d of the first %d rows without n3; median p99 %.1f ms with n3, %.1f ms without", len(intruders), control, median(withN3), median(without))
	if len(intruders) > control/4 || median(withN3) <= median(without) {
		t.Errorf("by p99: got %v among the first %d rows (want at most %d); median p99 %.1f ms with n3, %.1f ms without (want higher with)",
			intruders, control, control/4, median(withN3), median(without))
	}

	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	st := c.kvctl(sctx, n1, "status", "-o", "json")
	cancel()
	var status struct {
		Nodes []struct {
			ID   string          `json:"id"`
			Slow json.RawMessage `json:"slow"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &status); err != nil {
		t.Fatalf("status json: %v\n%.500s", err, st.stdout)
	}
	for _, n := range status.Nodes {
		slow := len(n.Slow) > 0 && string(n.Slow) != "null"
		if slow != (n.ID == "n3") {
			t.Errorf("status: node %s slow %s, want only n3 slow for others", n.ID, n.Slow)
		}
	}

	// The pulses stop: within a window (10 s) and a slice (5 s), and kvctl's own time, no
	// vnode names n3 any more.
	stopPulses()
	pulseWG.Wait()
	stopped := time.Now()
	for {
		time.Sleep(time.Second)
		v = c.vnodesOf(n1)
		mine, _ := named(v, "n3")
		if len(mine) == 0 {
			t.Logf("attribution cleared %v after the pulses stopped", time.Since(stopped).Round(100*time.Millisecond))
			break
		}
		if time.Since(stopped) > 25*time.Second {
			t.Fatalf("attribution: n3 still named on %d vnodes %v after the pulses stopped, want none after 15 s", len(mine), time.Since(stopped).Round(time.Second))
		}
	}

	stopLoad()
	loadWG.Wait()
	acked := tr.finish(t)
	if len(acked) == 0 {
		t.Fatalf("no write acknowledged")
	}
	c.checkReads([]*proc{n1, n2, n3}, prior, size, acked, 50)
}

func ptr(p *float64) any {
	if p == nil {
		return "–"
	}
	return *p
}
