package test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

// TestRingStallNamesSource: a move's source is stopped (SIGSTOP) while a node is added; with
// --move-stall-after 2s its receiver reports the move stalled, naming the source, in kvctl
// ring status (-o json), its /readyz problems and the ringkv_ring_change_moves_stalled gauge.
// Once the source is continued the change completes and every acknowledged write reads back.
func TestRingStallNamesSource(t *testing.T) {
	long(t)
	t.Parallel()
	c := startClusterFlags(t, 3, 1, []string{"--vnodes", "2", "--move-stall-after", "2s"})
	founders, n4 := c.nodes[:3], c.nodes[3]
	prior := crashKeys()
	c.load(founders, prior, valueSize, 32)
	cmd, out, errOut, done := startAdd(t, c, founders[0], n4, "50KB/s")

	// Stop the source of a range n4 pulls now.
	var src *proc
	waitFor(t, 30*time.Second, "a range streaming", func() error {
		p, err := c.changeStatus(founders[0])
		if err != nil {
			return err
		}
		for _, r := range p.GetRanges() {
			if r.GetState() == kvpb.MoveState_MOVE_STATE_STREAMING && r.GetPullingFrom() != "" {
				src = c.node(r.GetPullingFrom())
				return nil
			}
		}
		return fmt.Errorf("none streaming among %d ranges", len(p.GetRanges()))
	})
	if err := src.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %s: %v", src.id, err)
	}
	continued := false
	cont := func() {
		if !continued {
			continued = true
			if err := src.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT %s: %v", src.id, err)
			}
		}
	}
	defer cont()
	var live []*proc
	for _, p := range founders {
		if p != src {
			live = append(live, p)
		}
	}
	tr := c.startTraffic(live, 2, prior, valueSize)

	// kvctl ring status -o json, through a live founder.
	var stall *kvpb.MoveStall
	waitFor(t, 60*time.Second, "a stalled range in kvctl ring status", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r := c.kvctl(ctx, live[0], "ring", "status", "-o", "json")
		if r.code != 0 {
			return fmt.Errorf("exit %d: %s", r.code, r.stderr)
		}
		p := progressOf(t, r)
		for _, rg := range p.GetRanges() {
			if s := rg.GetStall(); s != nil && s.GetSource() == src.id {
				if p.GetStalledMoves() == 0 {
					t.Errorf("got a stalled range but stalled_moves 0")
				}
				stall = s
				return nil
			}
		}
		return fmt.Errorf("%d stalled ranges, none from %s", p.GetStalledMoves(), src.id)
	})
	line := kvpb.StallLine(stall)
	t.Logf("stall while %s is stopped: %s", src.id, line)
	if !strings.Contains(line, src.id) || stall.GetReceiver() != n4.id {
		t.Errorf("got stall %q (receiver %q), want it to name source %s and receiver %s", line, stall.GetReceiver(), src.id, n4.id)
	}
	if c := stall.GetCause(); c != kvpb.StallCause_STALL_CAUSE_NO_DATA && c != kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE {
		t.Errorf("got cause %v, want no data or source unreachable", c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	text := c.kvctl(ctx, live[0], "ring", "status", "--once")
	cancel()
	if !strings.Contains(text.stdout, "stalled") || !strings.Contains(text.stdout, src.id) {
		t.Errorf("kvctl ring status --once: got\n%s\nwant a stalled line naming %s", text.stdout, src.id)
	}

	code, body, err := request(http.MethodGet, "http://"+n4.admin+"/readyz", nil)
	if err != nil || code == http.StatusOK || !strings.Contains(body, "stalled") || !strings.Contains(body, src.id) {
		t.Errorf("n4 /readyz: got %d %q (%v), want 503 naming the stalled move from %s", code, body, err, src.id)
	}
	_, metrics, err := request(http.MethodGet, "http://"+n4.admin+"/metrics", nil)
	if err != nil || !strings.Contains(metrics, "ringkv_ring_change_moves_stalled ") || strings.Contains(metrics, "ringkv_ring_change_moves_stalled 0") {
		t.Errorf("n4 /metrics: want ringkv_ring_change_moves_stalled above 0 (%v)", err)
	}

	cont()
	c.kvctl(context.Background(), founders[1], "ring", "rate", "20MB/s")
	res := waitKvctl(t, cmd, out, errOut, done, 3*time.Minute)
	acked := tr.finish(t)
	if p := progressOf(t, res); res.code != 0 || p.GetState() != kvpb.ChangeState_CHANGE_STATE_DONE {
		t.Fatalf("kvctl ring add after SIGCONT: exit %d, state %v\nstderr:\n%s", res.code, p.GetState(), res.stderr)
	}
	c.checkReads(c.nodes, prior, valueSize, acked, sampleKeys())
}
