package test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

// pausedFlat is how long a paused change must move no byte after its raft leader is killed.
const pausedFlat = 10 * time.Second

// TestRingPauseSurvivesLeaderKill: a ring add streams under a constant-rate writer that
// records every acknowledged write; kvctl ring pause stops it; the raft leader is killed with
// SIGKILL while paused: the change stays PAUSED and its bytes done stay put for pausedFlat;
// the leader restarts, still paused; resume lets the change complete, and bench check reads
// every recorded write back at quorum: none lost. The refusals say one line each.
func TestRingPauseSurvivesLeaderKill(t *testing.T) {
	long(t)
	t.Parallel()
	c := startCluster(t, 3, 1)
	founders, n4 := c.nodes[:3], c.nodes[3]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	leader := c.leader(founders)
	var others []*proc
	for _, p := range founders {
		if p != leader {
			others = append(others, p)
		}
	}
	via := others[0]
	t.Logf("raft leader: %s; kvctl through %s", leader.id, via.id)
	if r := c.kvctl(ctx, via, "bench", "fill", "--keys", "6000", "--value-size", "1000", "--connections", "16"); r.code != 0 {
		t.Fatalf("bench fill: exit %d\n%s", r.code, r.stderr)
	}
	if r := c.kvctl(ctx, via, "ring", "pause"); r.code != 3 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("pause with nothing in flight: got exit %d, stderr %q, want 3 and one line", r.code, r.stderr)
	}

	record := filepath.Join(t.TempDir(), "acked.jsonl")
	// The bench is the writer whose acknowledged writes bench check reads back, not a
	// measurement: --max-lag 1m keeps it from calling its result invalid (exit 1) when a busy
	// machine leaves it behind its schedule (440 ms at a load average of 30-45 across the
	// kill); its unsent requests are still counted, and what is asserted is nothing lost.
	bench := c.kvctlCmd(ctx, via, "bench", "--rate", "100", "--duration", "40s", "--workload", "mixed:get=50,put=50",
		"--key-dist", "sequential", "--keys", "1000000", "--value-size", "200", "--ack", "2", "--from", "3",
		"--connections", "8", "--max-errors", "5", "--max-lag", "1m", "--record", record)
	var benchOut, benchErr bytes.Buffer
	bench.Stdout, bench.Stderr = &benchOut, &benchErr
	if err := bench.Start(); err != nil {
		t.Fatal(err)
	}
	benchDone := make(chan error, 1)
	go func() { benchDone <- bench.Wait() }()

	cmd, out, errOut, done := startAdd(t, c, via, n4, "200KB/s")
	if r := c.kvctl(ctx, via, "ring", "pause", "--reason", "p99 over SLO"); r.code != 0 || !strings.Contains(r.stdout, "PAUSED by ") {
		t.Fatalf("pause: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.kvctl(ctx, via, "ring", "pause"); r.code != 3 || !strings.Contains(r.stderr, "paused already") {
		t.Errorf("pause twice: got exit %d, stderr %q, want 3 naming the pause", r.code, r.stderr)
	}
	// Pulls stop within a second: what arrived after that second is the mark.
	time.Sleep(time.Second)
	mark, err := c.changeStatus(via)
	if err != nil {
		t.Fatal(err)
	}
	if mark.GetState() != kvpb.ChangeState_CHANGE_STATE_PAUSED || mark.GetBytesDone() == 0 || mark.GetBytesDone() >= mark.GetBytesTotal() {
		t.Fatalf("after the pause: got %s with %d of %d bytes, want PAUSED part-way", mark.GetState(), mark.GetBytesDone(), mark.GetBytesTotal())
	}

	t.Logf("paused at %d of %d bytes", mark.GetBytesDone(), mark.GetBytesTotal())
	c.kill(leader)
	deadline := time.Now().Add(pausedFlat)
	for time.Now().Before(deadline) {
		p, err := c.changeStatus(via)
		switch {
		case err != nil:
			t.Logf("status while the leader is down: %v", err)
		case p.GetState() != kvpb.ChangeState_CHANGE_STATE_PAUSED:
			t.Fatalf("leader killed: got state %s, want PAUSED", p.GetState())
		case p.GetBytesDone() != mark.GetBytesDone():
			t.Fatalf("leader killed: got %d bytes done, want %d (flat while paused)", p.GetBytesDone(), mark.GetBytesDone())
		}
		time.Sleep(time.Second)
	}
	t.Logf("leader %s killed: PAUSED at %d bytes for %v", leader.id, mark.GetBytesDone(), pausedFlat)
	c.restart(leader)
	c.waitServing(leader)
	waitFor(t, 30*time.Second, "the restarted leader to see the pause", func() error {
		p, err := c.changeStatus(leader)
		if err != nil {
			return err
		}
		if p.GetState() != kvpb.ChangeState_CHANGE_STATE_PAUSED || len(p.GetPauses()) != 1 || p.GetPauses()[0].GetReason() != "p99 over SLO" {
			return fmt.Errorf("got %s, pauses %v", p.GetState(), p.GetPauses())
		}
		if p.GetBytesDone() != mark.GetBytesDone() {
			t.Fatalf("restarted: got %d bytes done, want %d (flat while paused)", p.GetBytesDone(), mark.GetBytesDone())
		}
		return nil
	})
	if r := c.kvctl(ctx, via, "ring", "status", "--once"); !strings.Contains(r.stdout, "PAUSED by ") ||
		!strings.Contains(r.stdout, ": p99 over SLO") || !strings.Contains(r.stdout, "writes wait for ack + 1 pending replica") {
		t.Errorf("ring status of the paused change:\n%s%s", r.stdout, r.stderr)
	}
	if r := c.kvctl(ctx, via, "ring", "resume"); r.code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.kvctl(ctx, via, "ring", "resume"); r.code != 3 {
		t.Errorf("resume twice: got exit %d, want 3\n%s", r.code, r.stderr)
	}
	if r := c.kvctl(ctx, via, "ring", "rate", "0"); r.code != 2 || !strings.Contains(r.stderr, "--unlimited") {
		t.Errorf("rate 0: got exit %d, stderr %q, want 2 with a hint at --unlimited", r.code, r.stderr)
	}
	if r := c.kvctl(ctx, via, "ring", "rate", "1", "--node", "n9"); r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("rate of an unknown node: got exit %d, stderr %q, want a failure in one line", r.code, r.stderr)
	}
	if r := c.kvctl(ctx, via, "ring", "rate", "--unlimited"); r.code != 0 {
		t.Fatalf("rate --unlimited: exit %d\n%s", r.code, r.stderr)
	}
	res := waitKvctl(t, cmd, out, errOut, done, 2*time.Minute)
	if p := progressOf(t, res); res.code != 0 || p.GetState() != kvpb.ChangeState_CHANGE_STATE_DONE {
		t.Fatalf("ring add: exit %d, state %s\nstderr:\n%s", res.code, p.GetState(), tail(bytes.NewBufferString(res.stderr), 20))
	} else if p.GetPausedSeconds() < pausedFlat.Seconds() {
		t.Errorf("paused for %.0fs, want at least %v", p.GetPausedSeconds(), pausedFlat)
	}

	if err := <-benchDone; err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, benchOut.String(), tail(&benchErr, 20))
	}
	t.Logf("bench: %s", tail(&benchOut, 3))
	chk := c.kvctl(ctx, via, "bench", "check", record, "--ack", "2", "--from", "3")
	if chk.code != 0 || !strings.Contains(chk.stdout, ": 0 lost, 0 unreadable") {
		t.Fatalf("bench check: exit %d\n%s%s", chk.code, chk.stdout, chk.stderr)
	}
	t.Logf("bench check: %s", strings.TrimSpace(chk.stdout))
}
