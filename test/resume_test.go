package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

// streamChunkBytes is the most a StreamRange chunk of valueSize-byte values holds: 512
// records (node/server's chunkRecords), at most 1 MiB.
func streamChunkBytes(size int) uint64 { return min(512*uint64(len("k000000")+size), 1<<20) }

// resumeCase is one SIGKILL of a receiver mid-move: keys of size bytes loaded, the receiver's
// resume points every ckpt bytes (flags), the change streamed at rate until the kill.
type resumeCase struct {
	keys, size int
	ckpt       uint64
	flags      []string
	rate       string
	// killAt is the share of the receiver's bytes streamed when it is killed.
	killAt float64
}

// TestRingResumeAfterReceiverKill: the node being added is killed with SIGKILL mid-move
// under a constant-rate writer (kvctl bench --record) and restarted on its data directory.
// It pulls on from the resume points it saved: it reports bytes resumed from, and at most
// one checkpoint interval plus a chunk per move in flight pulled again; every acknowledged
// write is read back (kvctl bench check).
//
// RINGKV_RESUME_BENCH=1 runs the measurement of docs/bench.md instead: a move of over 200 MiB
// with the default checkpoints (64 MiB or 10 s), RINGKV_RESUME_VNODES tokens per node.
func TestRingResumeAfterReceiverKill(t *testing.T) {
	long(t)
	t.Parallel()
	// Two tokens a node: moves of about 600 KiB, each many checkpoints long, so that a pull
	// from the start (about 2 MB again) cannot pass for a resumed one.
	rc := resumeCase{keys: 60_000, size: valueSize, ckpt: 64 << 10, rate: "400KB/s", killAt: 0.4,
		flags: []string{"--vnodes", "2", "--move-checkpoint-bytes", "64KiB", "--move-checkpoint-interval", "1s"}}
	if os.Getenv("RINGKV_RESUME_BENCH") != "" {
		rc = resumeCase{keys: 280_000, size: 1000, ckpt: 64 << 20, rate: "64MB/s", killAt: 0.4}
		if v := os.Getenv("RINGKV_RESUME_VNODES"); v != "" {
			rc.flags = append(rc.flags, "--vnodes", v)
		}
		if r := os.Getenv("RINGKV_RESUME_RATE"); r != "" {
			rc.rate = r
		}
		if k, err := strconv.ParseFloat(os.Getenv("RINGKV_RESUME_KILL_AT"), 64); err == nil {
			rc.killAt = k
		}
	}
	c := startClusterFlags(t, 3, 1, rc.flags)
	founders, n4 := c.nodes[:3], c.nodes[3]
	c.load(founders, rc.keys, rc.size, 32)

	record := filepath.Join(t.TempDir(), "acked.jsonl")
	bench := c.startRecordedBench(founders[1], record, "50", "10m", 2)

	start := time.Now()
	cmd, out, errOut, done := startAdd(t, c, founders[0], n4, rc.rate)
	// The receiver's own count of what it pulled, until it has streamed killAt of its share.
	var before *kvpb.ChangeProgress
	waitFor(t, 2*time.Minute, "the receiver part-way through", func() error {
		p, err := c.changeStatus(founders[0])
		if err != nil {
			return err
		}
		if p.GetState() != kvpb.ChangeState_CHANGE_STATE_STREAMING {
			t.Fatalf("change %v before the kill: want it streaming (raise killAt's margin or lower the rate)", p.GetState())
		}
		if float64(p.GetBytesDone()) < rc.killAt*float64(p.GetBytesTotal()) {
			return fmt.Errorf("%d of %d bytes", p.GetBytesDone(), p.GetBytesTotal())
		}
		before = p
		return nil
	})
	c.kill(n4)
	killedAt := time.Since(start)
	inFlight := 0
	for _, r := range before.GetRanges() {
		if r.GetState() == kvpb.MoveState_MOVE_STATE_STREAMING {
			inFlight++
		}
	}
	c.restart(n4)
	res := waitKvctl(t, cmd, out, errOut, done, 5*time.Minute)
	if res.code != 0 {
		t.Fatalf("kvctl ring add: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	p := progressOf(t, res)
	if p.GetState() != kvpb.ChangeState_CHANGE_STATE_DONE {
		t.Fatalf("got change state %q, want done", p.GetState())
	}
	took := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	local, err := c.admin(n4).ChangeStatus(ctx, &kvpb.ChangeStatusRequest{Local: true})
	cancel()
	if err != nil {
		t.Fatalf("n4's own progress: %v", err)
	}
	resumedMoves := 0
	for _, r := range local.GetRanges() {
		if r.GetResumedFromBytes() > 0 {
			resumedMoves++
		}
	}
	// Each move in flight at the kill pulls again at most what came since its last point
	// (under ckpt, or one interval's worth) and the batch that crossed it; the receiver
	// counts as pulled twice also the writer's records that reached it first.
	const parallel = 4
	bound := uint64(max(inFlight, parallel))*(rc.ckpt+streamChunkBytes(rc.size)) + 50*uint64(took.Seconds()+1)*(64+16)
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("change of %d bytes (%d keys) done in %s; n4 killed at %s with %d of %d bytes done, %d moves streaming; after its restart: %d moves resumed from %d bytes, %d bytes pulled again (bound %d); load %s",
		p.GetBytesDone(), p.GetKeysDone(), took.Round(time.Millisecond), killedAt.Round(time.Millisecond), before.GetBytesDone(), before.GetBytesTotal(), inFlight,
		resumedMoves, local.GetResumedFromBytes(), local.GetRepulledBytes(), bound, strings.TrimSpace(string(load)))
	if local.GetResumedFromBytes() == 0 && before.GetBytesDone() > 2*rc.ckpt*uint64(parallel) {
		t.Errorf("got nothing resumed from after %d bytes streamed before the kill, want the saved points used", before.GetBytesDone())
	}
	if local.GetRepulledBytes() > bound {
		t.Errorf("got %d bytes pulled again after the restart, want at most %d (%d moves in flight × (%d + a chunk) + the writer's)", local.GetRepulledBytes(), bound, inFlight, rc.ckpt)
	}

	bench.interrupt()
	bench.wait(t, time.Minute)
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	check := c.kvctl(ctx, founders[0], "bench", "check", record, "--ack", "2", "--from", "3")
	if check.code != 0 {
		t.Fatalf("bench check: got exit %d\nstdout:\n%s\nstderr:\n%s\nbench:\n%s%s", check.code, check.stdout, check.stderr, tail(&bench.out, 12), tail(&bench.errOut, 12))
	}
	t.Logf("bench check: %s", strings.TrimSpace(check.stdout))
	if n, _ := strconv.Atoi(os.Getenv("RINGKV_RESUME_READ")); n > 0 || os.Getenv("RINGKV_RESUME_BENCH") == "" {
		c.checkReads(c.nodes, rc.keys, rc.size, nil, sampleKeys())
	}
}
