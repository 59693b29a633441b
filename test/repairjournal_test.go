package test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// A repair session survives its coordinator and pauses: its progress is journaled in raft.
// A replica missed writes while down; a repair coordinated by another node is paused (no
// progress while paused, resume goes on), then its coordinator is killed with SIGKILL and
// the session completes — on the restarted coordinator, or on the raft leader when the
// coordinator stays down — without walking the ranges done before the kill again (the
// replicas' tree-walk counters), and the replica that missed the writes holds them after.

// repairScenario is a cluster of founders (N=3) whose n3 misses the acknowledged writes
// returned, 1 KiB each, so that a repair at a low rate takes seconds.
func repairScenario(t *testing.T, founders int, flags []string) (*tcluster, map[string]string) {
	// Hints bounded to 1 KiB: n3 must miss the writes until the repair.
	c := startClusterFlags(t, founders, 0, append([]string{"--repair-interval", "0", "--max-hint-bytes", "1K"}, flags...))
	n1, n3 := c.node("n1"), c.node("n3")
	c.kill(n3)
	acked := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	const keys = 1500
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < keys; i += 8 {
				key := fmt.Sprintf("j%05d", i)
				val := string(valueOf(key, 1024))
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.kv(n1).Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte(val), Ack: 2, From: 3})
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
	if len(acked) < keys*9/10 {
		t.Fatalf("%d of %d ack=2 writes acknowledged with one node down; want nearly all", len(acked), keys)
	}
	c.restart(n3)
	c.waitUp(n3)
	missing, err := c.missingOn(n3, acked)
	if err != nil {
		t.Fatal(err)
	}
	if missing < len(acked)/2 {
		t.Fatalf("n3 misses %d of %d acknowledged keys before the repair; want most (hints must not have healed it)", missing, len(acked))
	}
	t.Logf("%d acknowledged writes; n3 misses %d of them before the repair", len(acked), missing)
	return c, acked
}

// repairStatus is p's RepairStatus.
func (c *tcluster) repairStatus(p *proc) (*kvpb.RepairProgress, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.admin(p).RepairStatus(ctx, &kvpb.RepairStatusRequest{})
}

// startRepair starts a repair coordinated by p (retried while a restarted replica's peers
// reconnect).
func (c *tcluster) startRepair(p *proc, req *kvpb.RepairRequest) *kvpb.RepairPlan {
	c.t.Helper()
	var plan *kvpb.RepairPlan
	waitFor(c.t, 30*time.Second, "repair started", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		plan, err = c.admin(p).StartRepair(ctx, req)
		return err
	})
	return plan
}

// waitRangesDone waits until session id, as p reports it, has at least n ranges done; it
// fails if the session ends first.
func (c *tcluster) waitRangesDone(p *proc, id uint64, n uint32) *kvpb.RepairProgress {
	c.t.Helper()
	var last *kvpb.RepairProgress
	waitFor(c.t, 60*time.Second, fmt.Sprintf("repair %d: %d ranges done", id, n), func() error {
		st, err := c.repairStatus(p)
		if err != nil {
			return err
		}
		last = st
		if st.GetId() != id {
			return fmt.Errorf("repair %d, want %d", st.GetId(), id)
		}
		if !st.GetState().InFlight() {
			c.t.Fatalf("repair %d ended %s after %d of %d ranges, before the test could act (%s)", id, st.GetState(), st.GetRangesDone(), st.GetRangesTotal(), st.GetError())
		}
		if st.GetRangesDone() < n {
			return fmt.Errorf("%d of %d ranges done", st.GetRangesDone(), st.GetRangesTotal())
		}
		return nil
	})
	return last
}

// waitRepairEnd waits until session id, as p reports it, has ended, and returns its progress.
func (c *tcluster) waitRepairEnd(p *proc, id uint64, within time.Duration) *kvpb.RepairProgress {
	c.t.Helper()
	var last *kvpb.RepairProgress
	waitFor(c.t, within, fmt.Sprintf("repair %d ended", id), func() error {
		st, err := c.repairStatus(p)
		if err != nil {
			return err
		}
		if st.GetId() != id {
			return fmt.Errorf("repair %d, want %d", st.GetId(), id)
		}
		last = st
		if st.GetState().InFlight() {
			return fmt.Errorf("%s: %d of %d ranges (coordinator %s)", present(st), st.GetRangesDone(), st.GetRangesTotal(), st.GetCoordinator())
		}
		return nil
	})
	return last
}

func present(p *kvpb.RepairProgress) string {
	if p.GetPaused() != nil {
		return "paused"
	}
	return p.GetState().String()
}

// treeWalks is p's ringkv_repair_tree_walks_total.
func (c *tcluster) treeWalks(p *proc) uint64 {
	c.t.Helper()
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		c.t.Fatalf("metrics of %s: %v", p.id, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ringkv_repair_tree_walks_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				c.t.Fatalf("metrics of %s: %q: %v", p.id, sc.Text(), err)
			}
			return uint64(f)
		}
	}
	c.t.Fatalf("metrics of %s: no ringkv_repair_tree_walks_total", p.id)
	return 0
}

// checkHeld fails unless each of nodes holds every acknowledged key with its value.
func (c *tcluster) checkHeld(nodes []*proc, acked map[string]string) {
	c.t.Helper()
	for _, p := range nodes {
		missing, err := c.missingOn(p, acked)
		if err != nil {
			c.t.Fatalf("scan %s: %v", p.id, err)
		}
		if missing > 0 {
			c.t.Errorf("%s misses %d of %d acknowledged keys after the repair", p.id, missing, len(acked))
		}
	}
}

// killMidSession starts the repair req on coordinator, lets a quarter of its ranges finish,
// and kills the coordinator with SIGKILL. It returns the session, the ranges done seen just
// before the kill, and the other nodes' tree walks at that point.
func (c *tcluster) killMidSession(coordinator *proc, others []*proc, req *kvpb.RepairRequest) (id uint64, total, doneBefore uint32, walks map[string]uint64) {
	c.t.Helper()
	plan := c.startRepair(coordinator, req)
	id, total = plan.GetId(), uint32(len(plan.GetRanges()))
	st := c.waitRangesDone(coordinator, id, total/4)
	c.kill(coordinator)
	// The counters after the kill: read before it, the ranges the coordinator finished while
	// they were read (seconds on a loaded machine) counted as continued and their walks as
	// walked after the kill (66 against at most 63, twice in fresh-clone CIs at load ~20).
	walks = map[string]uint64{}
	for _, p := range others {
		walks[p.id] = c.treeWalks(p)
	}
	c.t.Logf("repair %d: %s killed with %d of %d ranges done", id, coordinator.id, st.GetRangesDone(), total)
	return id, total, st.GetRangesDone(), walks
}

// checkContinued checks the session's end: done, continued from at least doneBefore ranges,
// and the tree walks since the kill (walks: the counters then; a restarted node counts from
// 0) at most those of the ranges left, plus the ranges cut by the kill (2 at a time).
func (c *tcluster) checkContinued(final *kvpb.RepairProgress, total, doneBefore uint32, walks map[string]uint64, nodes []*proc) {
	c.t.Helper()
	if final.GetState() != kvpb.RepairState_REPAIR_STATE_DONE {
		c.t.Fatalf("repair %d ended %s (%s), want done", final.GetId(), final.GetState(), final.GetError())
	}
	if final.GetRangesContinued() < doneBefore {
		c.t.Errorf("continued from %d ranges done, want at least the %d seen done before the kill", final.GetRangesContinued(), doneBefore)
	}
	var after uint64
	for _, p := range nodes {
		after += c.treeWalks(p) - walks[p.id]
	}
	const replicas, parallel = 3, 2
	limit := uint64(replicas*(total-final.GetRangesContinued()) + replicas*parallel)
	c.t.Logf("repair %d done on %s: %d of %d ranges continued, %d tree walks after the kill (at most %d; a session started over would walk about %d)",
		final.GetId(), final.GetCoordinator(), final.GetRangesContinued(), total, after, limit, replicas*total)
	if after > limit {
		c.t.Errorf("%d tree walks after the kill, want at most %d: ranges done before it were walked again", after, limit)
	}
}

// TestRepairPauseAndCoordinatorKill: kvctl repair pause stops a session's progress and
// resume goes on; a coordinator killed with SIGKILL mid-session continues it when it
// restarts, from the ranges done.
func TestRepairPauseAndCoordinatorKill(t *testing.T) {
	long(t)
	t.Parallel()
	c, acked := repairScenario(t, 3, nil)
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	ctx := context.Background()

	if r := c.kvctl(ctx, n1, "repair", "pause"); r.code != 3 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("repair pause with no repair: exit %d, stderr %q; want 3 and one line", r.code, r.stderr)
	}
	if r := c.kvctl(ctx, n1, "repair", "resume"); r.code != 3 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("repair resume when not paused: exit %d, stderr %q; want 3 and one line", r.code, r.stderr)
	}

	// Pause: asked of n1, the session coordinated by n2 makes no progress until resumed.
	plan := c.startRepair(n2, &kvpb.RepairRequest{RateBytes: 384 << 10})
	id, total := plan.GetId(), uint32(len(plan.GetRanges()))
	c.waitRangesDone(n2, id, 2)
	if r := c.kvctl(ctx, n1, "repair", "pause", "--reason", "peak traffic"); r.code != 0 || !strings.Contains(r.stdout, "PAUSED by") {
		t.Fatalf("repair pause: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := c.kvctl(ctx, n3, "repair", "status")
	if r.code != 0 || !strings.Contains(r.stdout, "PAUSED by") || !strings.Contains(r.stdout, "): peak traffic") {
		t.Errorf("repair status while paused: exit %d, want the PAUSED line:\n%s%s", r.code, r.stdout, r.stderr)
	}
	time.Sleep(time.Second) // the chunk and walks in flight settle (within 1 s)
	paused, err := c.repairStatus(n2)
	if err != nil {
		t.Fatal(err)
	}
	walks := c.treeWalks(n1) + c.treeWalks(n2) + c.treeWalks(n3)
	time.Sleep(3 * time.Second)
	still, err := c.repairStatus(n2)
	if err != nil {
		t.Fatal(err)
	}
	if still.GetPaused() == nil || still.GetRangesDone() != paused.GetRangesDone() || still.GetBytesStreamed() != paused.GetBytesStreamed() ||
		still.GetKeysCompared() != paused.GetKeysCompared() {
		t.Errorf("paused for 3 s: ranges %d -> %d, bytes %d -> %d, keys compared %d -> %d (paused %v); want no progress",
			paused.GetRangesDone(), still.GetRangesDone(), paused.GetBytesStreamed(), still.GetBytesStreamed(),
			paused.GetKeysCompared(), still.GetKeysCompared(), still.GetPaused())
	}
	if w := c.treeWalks(n1) + c.treeWalks(n2) + c.treeWalks(n3); w != walks {
		t.Errorf("tree walks while paused: %d -> %d, want none", walks, w)
	}
	if r := c.kvctl(ctx, n3, "repair", "resume"); r.code != 0 {
		t.Fatalf("repair resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// SIGKILL of the coordinator once a quarter of the ranges are done; it restarts and
	// goes on. Asked meanwhile, another node finds the session in the journal.
	st := c.waitRangesDone(n2, id, total/4)
	// n2 counts a range done before it journals it (a range repaired but not journaled is
	// compared again by a continuation): the journal, as n1 reads it, may be a range or
	// two behind n2's count, but never behind what it held before the kill.
	journaled, err := c.repairStatus(n1)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]uint64{"n1": c.treeWalks(n1), "n3": c.treeWalks(n3)}
	c.kill(n2)
	doneBefore := st.GetRangesDone()
	t.Logf("repair %d: n2 killed with %d of %d ranges done, %d of them journaled as n1 read it before", id, doneBefore, total, journaled.GetRangesDone())
	js, err := c.repairStatus(n1)
	if err != nil || js.GetId() != id || !js.GetState().InFlight() || js.GetCoordinator() != "n2" ||
		js.GetRangesDone() < journaled.GetRangesDone() || js.GetRangesDone() == 0 {
		t.Errorf("n1's repair status with n2 down: repair %d %s on %s, %d ranges done (err %v); want repair %d in flight on n2, >= %d done (and some)",
			js.GetId(), js.GetState(), js.GetCoordinator(), js.GetRangesDone(), err, id, journaled.GetRangesDone())
	}
	c.restart(n2)
	c.waitUp(n2)
	final := c.waitRepairEnd(n2, id, 90*time.Second)
	c.checkContinued(final, total, doneBefore, before, []*proc{n1, n2, n3})
	if final.GetPausedSeconds() < 3 {
		t.Errorf("paused_seconds %d, want at least the 4 s it was paused", final.GetPausedSeconds())
	}
	c.checkHeld([]*proc{n1, n2, n3}, acked)
}

// TestRepairTakeover: a coordinator killed with SIGKILL that stays down has its session
// taken over by the raft leader, which completes it from the ranges done. Four nodes: the
// session covers the ranges of n3 that n2, its coordinator, holds no replica of (a range
// whose replica stays down cannot be repaired by anyone).
func TestRepairTakeover(t *testing.T) {
	long(t)
	t.Parallel()
	c, acked := repairScenario(t, 4, []string{"--repair-takeover-after", "2s"})
	n1, n2, n3, n4 := c.node("n1"), c.node("n2"), c.node("n3"), c.node("n4")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	plan, err := c.admin(n2).PlanRepair(ctx, &kvpb.RepairRequest{NodeId: "n3"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	req := &kvpb.RepairRequest{RateBytes: 64 << 10}
	for _, r := range plan.GetRanges() {
		if !slices.Contains(r.GetReplicas(), "n2") {
			req.Vnodes = append(req.Vnodes, r.GetEnd())
		}
	}
	if len(req.Vnodes) < 8 {
		t.Fatalf("%d ranges of n3 without a replica on n2; want at least 8", len(req.Vnodes))
	}
	id, total, doneBefore, walks := c.killMidSession(n2, []*proc{n1, n3, n4}, req)
	final := c.waitRepairEnd(n1, id, 90*time.Second)
	if final.GetPreviousCoordinator() != "n2" || final.GetCoordinator() == "n2" {
		t.Errorf("repair %d ended on %s, previous coordinator %q; want taken over from n2", id, final.GetCoordinator(), final.GetPreviousCoordinator())
	}
	// The node that took it over reports its own progress (the journal keeps less).
	for _, p := range []*proc{n1, n3, n4} {
		if p.id == final.GetCoordinator() {
			if own, err := c.repairStatus(p); err == nil && own.GetId() == id {
				final = own
			}
		}
	}
	c.checkContinued(final, total, doneBefore, walks, []*proc{n1, n3, n4})
	// n3 holds every acknowledged key of the ranges repaired.
	held, err := c.heldBy(n3)
	if err != nil {
		t.Fatal(err)
	}
	checked, missing := 0, 0
	for k, v := range acked {
		if !inRanges(plan, req.Vnodes, ring.Token([]byte(k))) {
			continue
		}
		checked++
		if held[k] != v {
			missing++
		}
	}
	t.Logf("%d acknowledged keys in the ranges repaired; n3 misses %d", checked, missing)
	if checked == 0 || missing > 0 {
		t.Errorf("n3 misses %d of the %d acknowledged keys of the ranges repaired", missing, checked)
	}
}

// inRanges reports whether token t is in one of plan's ranges that end at ends.
func inRanges(plan *kvpb.RepairPlan, ends []uint64, t uint64) bool {
	for _, r := range plan.GetRanges() {
		if !slices.Contains(ends, r.GetEnd()) {
			continue
		}
		s, e := r.GetStart(), r.GetEnd()
		if (s < e && s < t && t <= e) || (s >= e && (t > s || t <= e)) {
			return true
		}
	}
	return false
}

// TestRepairWatchAcrossCoordinatorRestart: kvctl repair, watching its session, outlives a
// SIGKILL and restart of the coordinator it watches: it reconnects and exits 0 when the
// session is done, or, when it gives up, exits non-zero with exactly one line naming why.
func TestRepairWatchAcrossCoordinatorRestart(t *testing.T) {
	long(t)
	t.Parallel()
	c, acked := repairScenario(t, 3, nil)
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	cmd := c.kvctlCmd(context.Background(), n2, "repair", "--rate", "384K", "--reconnect", "60s")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kvctl repair: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	})
	var id uint64
	waitFor(t, 60*time.Second, "repair on n2 with 2 ranges done", func() error {
		st, err := c.repairStatus(n2)
		if err != nil {
			return err
		}
		if !st.GetState().InFlight() || st.GetRangesDone() < 2 {
			return fmt.Errorf("repair %d %s, %d ranges done", st.GetId(), st.GetState(), st.GetRangesDone())
		}
		id = st.GetId()
		return nil
	})
	c.kill(n2)
	time.Sleep(2 * time.Second) // kvctl sees the watch lost, and retries
	c.restart(n2)
	c.waitUp(n2)
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("kvctl repair still runs 3 min after n2's restart; stderr:\n%s", errOut.String())
	}
	code := cmd.ProcessState.ExitCode()
	t.Logf("kvctl repair (session %d) -> exit %d (%v)\nstdout:\n%s\nstderr:\n%s", id, code, err, out.String(), errOut.String())
	if code != 0 {
		var lines []string
		for _, l := range strings.Split(errOut.String(), "\n") {
			if strings.HasPrefix(l, "kvctl: ") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 {
			t.Errorf("exit %d with %d kvctl: lines on stderr, want exactly one naming why:\n%s", code, len(lines), errOut.String())
		}
		return
	}
	final := c.waitRepairEnd(n2, id, 90*time.Second)
	if final.GetState() != kvpb.RepairState_REPAIR_STATE_DONE {
		t.Errorf("repair %d ended %s, want done", id, final.GetState())
	}
	c.checkHeld([]*proc{n1, n2, n3}, acked)
}
