package replica

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"

	"ringkv/internal/eventually"
	"ringkv/node/ring"
)

// A replica that is down when a write happens gets the write handed over once it is back,
// without any read touching the key.
func TestHintedHandoff(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	obs := &countingObserver{}
	// n2's connection reports its outages, as a real peer's does: its breaker, opened by
	// the failed handoffs while it is down, closes when it is back.
	tr := newFakeTransport(connectivity.Ready)
	n2 := watchedFaulty{c.nodes["n2"], tr}
	co := New(Config{ReplicaTimeout: time.Second, HintInterval: 20 * time.Millisecond, ProbeInterval: 10 * time.Millisecond},
		"n0", c.view.Load, c.nodes["n0"], func(m ring.Member) Replica {
			if m.ID == "n2" {
				return n2
			}
			return c.nodes[m.ID]
		}, nil, obs)
	t.Cleanup(func() { co.Close() })

	c.nodes["n2"].set(modeDown)
	tr.set(connectivity.TransientFailure, false)
	ts, err := co.Put(ctx, []byte("k"), []byte("v"), 2, 3)
	if err != nil {
		t.Fatalf("Put with one replica down: %v", err)
	}
	if _, ok := c.nodes["n2"].has(t, "k"); ok {
		t.Fatalf("n2 was down but holds k")
	}
	// The call to n2 may fail after the write was answered: its hint follows.
	eventually.Succeeds(t, 5*time.Second, func() error {
		if got, seen := co.Hints().Pending["n2"], obs.hints.Load(); got != 1 || seen != 1 {
			return fmt.Errorf("hints for n2 = %d, observer saw %d; want 1 and 1", got, seen)
		}
		return nil
	})
	// While n2 stays down the hint stays.
	time.Sleep(100 * time.Millisecond)
	if got := co.Hints().Pending["n2"]; got != 1 {
		t.Fatalf("hints for n2 while down = %d, want 1", got)
	}

	c.nodes["n2"].set(modeOK)
	tr.set(connectivity.Ready, true)
	eventually.Succeeds(t, 10*time.Second, func() error {
		rec, ok := c.nodes["n2"].has(t, "k")
		if !ok || rec.TS != ts || string(rec.Value) != "v" {
			return fmt.Errorf("n2 holds %+v (found %v), want the write at %d", rec, ok, ts)
		}
		return nil
	})
	st := co.Hints()
	if len(st.Pending) != 0 || st.Delivered != 1 || st.Bytes != 0 {
		t.Errorf("after the handoff: %+v, want nothing pending and 1 delivered", st)
	}
}

// Hints are bounded: the oldest go first, and are counted.
func TestHintsBounded(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{ReplicaTimeout: time.Second, HintBytes: 500, HintInterval: time.Hour}, nil)
	c.nodes["n2"].set(modeDown)
	for i := range 20 {
		if _, err := co.Put(ctx, fmt.Appendf(nil, "k%d", i), []byte("0123456789"), 2, 3); err != nil {
			t.Fatalf("Put: %v", err)
		}
		// A call to n2 may fail after its write was answered: wait for this write's hint
		// before the next write, so that hints are added in key order.
		eventually.Succeeds(t, 5*time.Second, func() error {
			if st := co.Hints(); st.Pending["n2"]+int(st.Dropped) != i+1 {
				return fmt.Errorf("hints %+v after %d writes: want pending + dropped = %d", st, i+1, i+1)
			}
			return nil
		})
	}
	if st := co.Hints(); st.Bytes > 500 || st.Dropped == 0 || st.Pending["n2"] == 0 {
		t.Fatalf("hints %+v: want at most 500 bytes, some dropped, some pending", st)
	}
	// The newest are kept.
	hs, err := co.hints.Next("n2", 100)
	if err != nil {
		t.Fatal(err)
	}
	if last := string(hs[len(hs)-1].Key); last != "k19" {
		t.Errorf("newest hint is %q, want k19", last)
	}
}
