package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"ringkv/internal/eventually"
	"ringkv/proto/kvpb"
)

const valueSize = 100

// priorKeys is how many keys a ring test loads before its change: 100k as the ring-change targets ask,
// 20k under -short.
func priorKeys() int {
	if testing.Short() {
		return 20_000
	}
	return 100_000
}

// crashKeys is how many keys the crash cases load: a fifth of priorKeys (the add and drain
// cases carry the full 100k). Loading them and reading them back is most of a crash case's
// time; what it checks is the kill in the middle of the stream, which crashRate keeps.
func crashKeys() int { return priorKeys() / 5 }

// crashRate is the receiver's throttle while a crash case kills a node: the ~0.75 of
// crashKeys a newcomer receives take about 4 s at it, a window the kill falls into.
func crashRate() string {
	if testing.Short() {
		return "100KB/s"
	}
	return "400KB/s"
}

// sampleKeys is how many keys (of the loaded ones and of the acknowledged writes) are read
// through every node; the others are read through one node each, in turn.
func sampleKeys() int {
	if testing.Short() {
		return 500
	}
	return 2_000
}

// dataBytes is the logical size (key + value) of the loaded keys and the acknowledged writes.
func dataBytes(loaded uint64, acked map[string]string) uint64 {
	for k, v := range acked {
		loaded += uint64(len(k) + len(v))
	}
	return loaded
}

// checkMoved checks that the receivers streamed at most 1.1 × the ideal: the fraction of
// the data the change hands to new owners (share) times all the data. Ranges whose source
// was killed, or stayed unreachable, are pulled again or from each other replica by design;
// their bytes are allowed on top, and logged.
func checkMoved(t *testing.T, c *tcluster, receivers []*proc, share float64, data uint64, killed ...*proc) {
	t.Helper()
	keys, moved, failedOver := c.streamedBytes(receivers, killed...)
	ideal := share * float64(data)
	t.Logf("streamed %d keys, %d bytes (%d in ranges whose source was killed or failed over); ideal %.0f bytes (%.3f of %d): ratio %.3f",
		keys, moved, failedOver, ideal, share, data, float64(moved)/ideal)
	if float64(moved) > 1.1*ideal+float64(failedOver) {
		t.Errorf("got %d bytes streamed (%d failed over), want at most 1.1 × %.0f (the ideal share) + the failed-over bytes", moved, failedOver, ideal)
	}
}

// addUnderLoad adds newcomer to the founders under traffic with kvctl, and runs the checks.
// It returns the acknowledged writes.
func addUnderLoad(t *testing.T, c *tcluster, founders []*proc, newcomer *proc, loaded uint64, rate string) map[string]string {
	t.Helper()
	prior := priorKeys()
	tr := c.startTraffic(founders, 2, prior, valueSize)
	waitFor(t, 10*time.Second, "traffic before the change", func() error {
		if n := tr.count(); n < 200 {
			return fmt.Errorf("%d acknowledged writes", n)
		}
		return nil
	})
	start := time.Now()
	res := c.kvctl(context.Background(), founders[0], "ring", "add", newcomer.id+"="+newcomer.grpc, "--yes", "--rate", rate, "-o", "json")
	took := time.Since(start)
	if res.code != 0 {
		tr.finish(t)
		t.Fatalf("kvctl ring add: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	p := progressOf(t, res)
	t.Logf("change %d %s in %s: %d bytes, %d keys; stderr had %d progress lines", p.GetId(), p.GetState(), took.Round(time.Millisecond),
		p.GetBytesDone(), p.GetKeysDone(), strings.Count(res.stderr, "\n"))
	if p.GetState() != kvpb.ChangeState_CHANGE_STATE_DONE {
		t.Fatalf("got change state %q, want done", p.GetState())
	}
	before := tr.count()
	waitFor(t, 10*time.Second, "traffic after the change", func() error {
		if n := tr.count(); n < before+200 {
			return fmt.Errorf("%d acknowledged writes since the change", n-before)
		}
		return nil
	})
	acked := tr.finish(t)
	all := append(append([]*proc(nil), founders...), newcomer)
	c.waitEpochEverywhere(all, p.GetPlan().GetToEpoch())

	r := c.ringOf(founders[0])
	if got := len(r.GetRing().GetMembers()); got != len(all) {
		t.Errorf("got %d members, want %d", got, len(all))
	}
	o := ownershipOf(r, newcomer.id)
	if o == nil || o.GetState() != kvpb.NodeState_NODE_STATE_UP {
		t.Fatalf("got %s's ownership %v, want an UP member", newcomer.id, o)
	}
	want := 1 / float64(len(all))
	if o.GetShare() < 0.8*want || o.GetShare() > 1.2*want {
		t.Errorf("got %s's share of the token space %.3f, want ≈ %.3f", newcomer.id, o.GetShare(), want)
	}
	checkMoved(t, c, []*proc{newcomer}, o.GetReplicaShare(), dataBytes(loaded, acked))
	c.checkReads(all, prior, valueSize, acked, sampleKeys())
	return acked
}

// TestRingAddThenDrainUnderLoad: a 4th node joins three founders holding priorKeys keys
// while a writer and a reader run; then one of the four is drained under the same load.
func TestRingAddThenDrainUnderLoad(t *testing.T) {
	long(t)
	t.Parallel()
	c := startCluster(t, 3, 1)
	founders, n4 := c.nodes[:3], c.nodes[3]
	loaded := c.load(founders, priorKeys(), valueSize, 32)

	var acked map[string]string
	defer func() { c.t = t }()
	if !t.Run("add", func(t *testing.T) {
		c.t = t
		acked = addUnderLoad(t, c, founders, n4, loaded, "4")
	}) {
		return
	}
	t.Run("drain", func(t *testing.T) {
		c.t = t
		leaving := c.node("n2")
		stay := []*proc{c.node("n1"), c.node("n3"), n4}
		before := ownershipOf(c.ringOf(stay[0]), leaving.id)
		tr := c.startTraffic(stay, 2, priorKeys(), valueSize)
		waitFor(t, 10*time.Second, "traffic before the drain", func() error {
			if n := tr.count(); n < 200 {
				return fmt.Errorf("%d acknowledged writes", n)
			}
			return nil
		})
		res := c.kvctl(context.Background(), stay[0], "ring", "drain", leaving.id, "--yes", "--rate", "4", "-o", "json")
		if res.code != 0 {
			tr.finish(t)
			t.Fatalf("kvctl ring drain: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
		}
		p := progressOf(t, res)
		if p.GetState() != kvpb.ChangeState_CHANGE_STATE_DONE {
			t.Fatalf("got change state %q, want done", p.GetState())
		}
		more := tr.finish(t)
		for k, v := range more {
			acked[k] = v
		}
		c.waitEpochEverywhere(stay, p.GetPlan().GetToEpoch())
		r := c.ringOf(stay[0])
		if o := ownershipOf(r, leaving.id); o != nil {
			t.Errorf("got %s still in the ring (%v), want it out", leaving.id, o)
		}
		if got := len(r.GetRing().GetMembers()); got != 3 {
			t.Errorf("got %d members, want 3", got)
		}
		// The drained node deletes what it no longer replicates once the ring flips. Keep
		// checking the other invariants if it does not end empty (a subtest's failure).
		t.Run("drained node ends empty", func(t *testing.T) {
			eventually.Succeeds(t, 20*time.Second, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				info, err := c.admin(leaving).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
				if err != nil {
					return err
				}
				if left := info.GetKeys(); left != 0 {
					return fmt.Errorf("got %d keys left on the drained %s, want 0", left, leaving.id)
				}
				return nil
			})
		})
		checkMoved(t, c, stay, before.GetReplicaShare(), dataBytes(loaded, acked))
		c.checkReads(stay, priorKeys(), valueSize, acked, sampleKeys())
	})
}

// startAdd starts `kvctl ring add` in the background through via and waits until the change
// streams: some bytes have arrived but not a quarter of the estimate.
func startAdd(t *testing.T, c *tcluster, via, newcomer *proc, rate string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, chan error) {
	t.Helper()
	cmd := c.kvctlCmd(context.Background(), via, "ring", "add", newcomer.id+"="+newcomer.grpc, "--yes", "--rate", rate, "-o", "json", "--reconnect", "2m")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kvctl: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor(t, 30*time.Second, "the change streaming", func() error {
		select {
		case err := <-done:
			t.Fatalf("kvctl ring add ended before the kill: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
		default:
		}
		p, err := c.changeStatus(via)
		if err != nil {
			return err
		}
		if p.GetState() != kvpb.ChangeState_CHANGE_STATE_STREAMING || p.GetBytesDone() == 0 {
			return fmt.Errorf("state %q, %d bytes done", p.GetState(), p.GetBytesDone())
		}
		if p.GetBytesTotal() > 0 && p.GetBytesDone() > p.GetBytesTotal()/4 {
			t.Logf("warning: %d of %d bytes already done before the kill", p.GetBytesDone(), p.GetBytesTotal())
		}
		return nil
	})
	return cmd, &out, &errOut, done
}

// waitKvctl waits for a background kvctl and returns its result.
func waitKvctl(t *testing.T, cmd *exec.Cmd, out, errOut *bytes.Buffer, done chan error, d time.Duration) kvctlResult {
	t.Helper()
	select {
	case err := <-done:
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return kvctlResult{out.String(), errOut.String(), code}
	case <-time.After(d):
		cmd.Process.Signal(syscall.SIGINT)
		<-done
		return kvctlResult{out.String(), errOut.String(), -1}
	}
}

// TestRingKillReceiverMidStream: the node being added is killed with SIGKILL while ranges
// stream into it and restarted on its data directory; the change completes.
func TestRingKillReceiverMidStream(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, 1)
	founders, n4 := c.nodes[:3], c.nodes[3]
	prior := crashKeys()
	loaded := c.load(founders, prior, valueSize, 32)
	tr := c.startTraffic(founders, 2, prior, valueSize)
	cmd, out, errOut, done := startAdd(t, c, founders[0], n4, crashRate())

	c.kill(n4)
	before := tr.count()
	waitFor(t, 10*time.Second, "writes while the receiver is down", func() error {
		if n := tr.count(); n < before+100 {
			return fmt.Errorf("%d acknowledged writes since the kill", n-before)
		}
		return nil
	})
	c.restart(n4)
	c.kvctl(context.Background(), founders[1], "ring", "rate", "20")
	res := waitKvctl(t, cmd, out, errOut, done, 2*time.Minute)
	if res.code != 0 {
		tr.finish(t)
		t.Fatalf("kvctl ring add: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	p := progressOf(t, res)
	if p.GetState() != kvpb.ChangeState_CHANGE_STATE_DONE {
		t.Fatalf("got change state %q, want done", p.GetState())
	}
	acked := tr.finish(t)
	all := c.nodes
	c.waitEpochEverywhere(all, p.GetPlan().GetToEpoch())
	r := c.ringOf(founders[0])
	o := ownershipOf(r, n4.id)
	if o == nil || o.GetState() != kvpb.NodeState_NODE_STATE_UP || o.GetShare() < 0.2 || o.GetShare() > 0.3 {
		t.Errorf("got n4's ownership %v, want UP with ≈ 0.25 of the token space", o)
	}
	// The restarted receiver counts what it streamed since its restart only.
	checkMoved(t, c, []*proc{n4}, o.GetReplicaShare(), dataBytes(loaded, acked))
	c.checkReads(all, prior, valueSize, acked, sampleKeys())
}

// TestRingKillLeaderMidChange: the raft leader is killed with SIGKILL while a node is being
// added; the change completes, or else it is aborted cleanly; no write is lost either way.
func TestRingKillLeaderMidChange(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, 1)
	founders, n4 := c.nodes[:3], c.nodes[3]
	prior := crashKeys()
	loaded := c.load(founders, prior, valueSize, 32)
	leader := c.leader(founders)
	var others []*proc
	for _, p := range founders {
		if p != leader {
			others = append(others, p)
		}
	}
	t.Logf("raft leader: %s", leader.id)
	tr := c.startTraffic(others, 2, prior, valueSize)
	cmd, out, errOut, done := startAdd(t, c, others[0], n4, crashRate())

	c.kill(leader)
	before := tr.count()
	waitFor(t, 20*time.Second, "writes while the leader is down", func() error {
		if n := tr.count(); n < before+100 {
			return fmt.Errorf("%d acknowledged writes since the kill", n-before)
		}
		return nil
	})
	c.restart(leader)
	c.kvctl(context.Background(), others[0], "ring", "rate", "20")
	res := waitKvctl(t, cmd, out, errOut, done, 90*time.Second)
	all := c.nodes
	if res.code == 0 && progressOf(t, res).GetState() == kvpb.ChangeState_CHANGE_STATE_DONE {
		p := progressOf(t, res)
		t.Logf("the change completed after the leader's kill")
		acked := tr.finish(t)
		c.waitEpochEverywhere(all, p.GetPlan().GetToEpoch())
		o := ownershipOf(c.ringOf(others[0]), n4.id)
		if o == nil || o.GetState() != kvpb.NodeState_NODE_STATE_UP || o.GetShare() < 0.2 || o.GetShare() > 0.3 {
			t.Errorf("got n4's ownership %v, want UP with ≈ 0.25 of the token space", o)
		}
		checkMoved(t, c, []*proc{n4}, o.GetReplicaShare(), dataBytes(loaded, acked), leader)
		c.checkReads(all, prior, valueSize, acked, sampleKeys())
		return
	}
	t.Logf("the change did not complete (kvctl exit %d): aborting\nstderr:\n%s", res.code, tail(bytes.NewBufferString(res.stderr), 20))
	ab := c.kvctl(context.Background(), others[0], "ring", "abort")
	if ab.code != 0 {
		t.Fatalf("kvctl ring abort: exit %d\n%s%s", ab.code, ab.stdout, ab.stderr)
	}
	acked := tr.finish(t)
	r := c.ringOf(others[0])
	if o := ownershipOf(r, n4.id); o != nil {
		t.Errorf("got n4 in the ring after the abort (%v), want it out", o)
	}
	if ch := r.GetChange(); ch != nil && (ch.GetState() == kvpb.ChangeState_CHANGE_STATE_STREAMING || ch.GetState() == kvpb.ChangeState_CHANGE_STATE_HANDING_OVER) {
		t.Errorf("got change %d %s after the abort, want none in flight", ch.GetId(), ch.GetState())
	}
	c.checkReads(founders, prior, valueSize, acked, sampleKeys())
}

// TestRingRefusals: kvctl refuses (exit 3) to remove a node when only N remain, to start a
// second change while one is in flight, and to add an address that does not answer; Ctrl-C
// stops watching while the change goes on; ring rate, status and abort act on it.
func TestRingRefusals(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, 1)
	founders, n4 := c.nodes[:3], c.nodes[3]
	n1 := founders[0]
	c.load(founders, 5_000, valueSize, 16)
	epoch := c.ringOf(n1).GetRing().GetEpoch()

	tests := []struct {
		name string
		args []string
	}{
		{"remove when only N remain", []string{"ring", "remove", "n2", "--yes"}},
		{"add an address that does not answer", []string{"ring", "add", "n9=" + freeAddr(t), "--yes"}},
		{"dry run of a refused remove", []string{"ring", "drain", "n3", "--dry-run"}},
	}
	for _, tt := range tests {
		res := c.kvctl(context.Background(), n1, tt.args...)
		if res.code != 3 {
			t.Errorf("%s: got exit %d, want 3\nstdout:\n%s\nstderr:\n%s", tt.name, res.code, res.stdout, res.stderr)
		}
		if !strings.Contains(res.stdout, "refused: ") {
			t.Errorf("%s: got plan without a refusal:\n%s", tt.name, res.stdout)
		}
	}
	if res := c.kvctl(context.Background(), n1, "ring", "add", n4.id+"="+n4.grpc); res.code != 2 {
		t.Errorf("add without --yes and without a terminal: got exit %d, want 2\n%s", res.code, res.stderr)
	}
	if got := c.ringOf(n1).GetRing().GetEpoch(); got != epoch {
		t.Fatalf("got epoch %d after refusals, want %d", got, epoch)
	}
	dry := c.kvctl(context.Background(), n1, "ring", "add", n4.id+"="+n4.grpc, "--dry-run")
	if dry.code != 0 || !strings.Contains(dry.stdout, "plan: add n4") || !strings.Contains(dry.stdout, "-> n4") && !strings.Contains(dry.stdout, "n4") {
		t.Errorf("dry run: got exit %d\n%s%s", dry.code, dry.stdout, dry.stderr)
	}

	// A slow change, watched, then left with Ctrl-C: it goes on.
	// 10 KiB/s for the receiver: the ~450 KB it receives take long enough for what follows.
	cmd, out, errOut, done := startAdd(t, c, n1, n4, "10KB/s")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT kvctl: %v", err)
	}
	res := waitKvctl(t, cmd, out, errOut, done, 10*time.Second)
	if res.code != 1 || !strings.Contains(res.stderr, "kvctl ring status") || !strings.Contains(res.stderr, "kvctl ring abort") {
		t.Errorf("Ctrl-C: got exit %d, want 1 with how to watch again or abort\nstderr:\n%s", res.code, res.stderr)
	}
	if p, err := c.changeStatus(n1); err != nil || p.GetState() != kvpb.ChangeState_CHANGE_STATE_STREAMING {
		t.Fatalf("after Ctrl-C: got %v (%v), want the change still streaming", p.GetState(), err)
	}

	second := c.kvctl(context.Background(), founders[1], "ring", "remove", "n3", "--yes", "--force")
	if second.code != 3 || !strings.Contains(second.stderr+second.stdout, "in flight") {
		t.Errorf("second change: got exit %d, want 3 naming the change in flight\nstdout:\n%s\nstderr:\n%s", second.code, second.stdout, second.stderr)
	}
	if r := c.kvctl(context.Background(), n1, "ring", "rate", "20KB/s"); r.code != 0 || !strings.Contains(r.stdout, "throttle now") {
		t.Errorf("ring rate: got exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := c.kvctl(context.Background(), n1, "ring", "status", "--once"); r.code != 0 || !strings.Contains(r.stdout, "add n4") {
		t.Errorf("ring status --once: got exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.kvctl(context.Background(), n1, "ring", "show"); r.code != 0 || !strings.Contains(r.stdout, "in flight") {
		t.Errorf("ring show: got exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.kvctl(context.Background(), founders[2], "ring", "abort"); r.code != 0 || !strings.Contains(r.stdout, "aborted") {
		t.Errorf("ring abort: got exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Every node applies the abort as raft delivers it.
	for _, p := range founders {
		waitFor(t, 10*time.Second, p.id+" back on the old ring", func() error {
			r := c.ringOf(p)
			if got := r.GetRing().GetEpoch(); got != epoch {
				return fmt.Errorf("epoch %d, want %d", got, epoch)
			}
			if o := ownershipOf(r, n4.id); o != nil {
				return fmt.Errorf("n4 still listed: %v", o)
			}
			return nil
		})
	}
	if r := c.kvctl(context.Background(), n1, "ring", "abort"); r.code == 0 {
		t.Errorf("abort with nothing in flight: got exit 0, want a failure")
	}
}
