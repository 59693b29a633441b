package replica

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"

	"ringkv/internal/eventually"
	"ringkv/node/hints"
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
	co := New(Config{ReplicaTimeout: time.Second, HintInterval: 20 * time.Millisecond, ProbeInterval: 10 * time.Millisecond, Hints: memHints(t, 64<<20)},
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
	// The hint is removed once n2 took it: just after the write lands.
	eventually.Succeeds(t, 5*time.Second, func() error {
		if st := co.Hints(); len(st.Pending) != 0 || st.Delivered != 1 || st.Bytes != 0 {
			return fmt.Errorf("after the handoff: %+v, want nothing pending and 1 delivered", st)
		}
		return nil
	})
}

// Hints are bounded: the oldest go first, and are counted.
func TestHintsBounded(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{ReplicaTimeout: time.Second, Hints: memHints(t, 500), HintInterval: time.Hour}, nil)
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

// Hints kept in a hints.Log on disk outlive the coordinator: written while n2 is down, the
// coordinator closed and the log reopened, a new coordinator hands them over in order once n2
// answers, without any read, and removes them from disk.
func TestHintsDurableAcrossCoordinatorRestart(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	dir := t.TempDir()
	open := func() *hints.Log {
		h, err := hints.Open(hints.Config{Dir: dir})
		if err != nil {
			t.Fatalf("OpenHints: %v", err)
		}
		return h
	}
	hints := open()
	co := New(Config{ReplicaTimeout: time.Second, Hints: hints, HintInterval: time.Hour}, "n0", c.view.Load, c.nodes["n0"],
		func(m ring.Member) Replica { return c.nodes[m.ID] }, nil, nil)
	c.nodes["n2"].set(modeDown)
	want := map[string]uint64{}
	for i := range 5 {
		k := fmt.Sprintf("k%d", i)
		// The same key twice: the newer version must win on n2 as it did on the others.
		for _, v := range []string{"old", "new"} {
			ts, err := co.Put(ctx, []byte(k), []byte(v), 2, 3)
			if err != nil {
				t.Fatalf("Put %s with n2 down: %v", k, err)
			}
			want[k] = ts
		}
	}
	eventually.Succeeds(t, 5*time.Second, func() error {
		if got := co.Hints().Pending["n2"]; got != 10 {
			return fmt.Errorf("hints for n2 = %d, want 10", got)
		}
		return nil
	})
	if err := co.Close(); err != nil {
		t.Fatal(err)
	}
	if err := hints.Close(); err != nil {
		t.Fatal(err)
	}

	hints = open()
	t.Cleanup(func() { hints.Close() })
	if got := hints.Queues(); len(got) != 1 || got[0].Count != 10 {
		t.Fatalf("hints on disk after the restart: %+v, want 10 for n2", got)
	}
	c.nodes["n2"].set(modeOK)
	co = New(Config{ReplicaTimeout: time.Second, Hints: hints, HintInterval: 20 * time.Millisecond}, "n0", c.view.Load, c.nodes["n0"],
		func(m ring.Member) Replica { return c.nodes[m.ID] }, nil, nil)
	t.Cleanup(func() { co.Close() })
	eventually.Succeeds(t, 10*time.Second, func() error {
		for k, ts := range want {
			rec, ok := c.nodes["n2"].has(t, k)
			if !ok || rec.TS != ts || string(rec.Value) != "new" {
				return fmt.Errorf("n2 holds %s = %+v (found %v), want the newer write at %d", k, rec, ok, ts)
			}
		}
		if st := co.Hints(); len(st.Pending) != 0 || st.Delivered != 10 {
			return fmt.Errorf("hints %+v, want none pending and 10 delivered", st)
		}
		return nil
	})
}

// A write that passes over a peer for its open breaker has the peer's hint stored before it
// is answered; the peer, once its breaker closes, gets its hints at once, not at the next
// periodic round (an hour away here).
func TestHintsHandedOverWhenBreakerCloses(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	tr := newFakeTransport(connectivity.Ready)
	n2 := watchedFaulty{c.nodes["n2"], tr}
	co := New(Config{ReplicaTimeout: time.Second, BreakerFailures: 2, ProbeInterval: 5 * time.Millisecond, HintInterval: time.Hour, Hints: memHints(t, 64<<20)},
		"n0", c.view.Load, c.nodes["n0"], func(m ring.Member) Replica {
			if m.ID == "n2" {
				return n2
			}
			return c.nodes[m.ID]
		}, nil, nil)
	t.Cleanup(func() { co.Close() })

	c.nodes["n2"].set(modeDown)
	tr.set(connectivity.TransientFailure, false)
	for i := range 4 {
		if _, err := co.Put(ctx, fmt.Appendf(nil, "k%d", i), []byte("v"), 2, 3); err != nil {
			t.Fatalf("Put with n2 down: %v", err)
		}
	}
	eventually.Succeeds(t, 5*time.Second, func() error {
		if got, b := co.Hints().Pending["n2"], breakerOf(co, "n2"); got != 4 || b.State != BreakerOpen {
			return fmt.Errorf("hints for n2 = %d, breaker %+v; want 4 and open", got, b)
		}
		return nil
	})
	// With the breaker open the write passes n2 over, and its hint is in the log before the
	// write is answered: no wait.
	if _, err := co.Put(ctx, []byte("k4"), []byte("v"), 2, 3); err != nil {
		t.Fatalf("Put with n2's breaker open: %v", err)
	}
	if got := co.Hints().Pending["n2"]; got != 5 {
		t.Fatalf("hints for n2 when the write was answered = %d, want 5", got)
	}
	c.nodes["n2"].set(modeOK)
	tr.set(connectivity.Ready, true)
	eventually.Succeeds(t, 10*time.Second, func() error {
		for i := range 5 {
			if _, ok := c.nodes["n2"].has(t, fmt.Sprintf("k%d", i)); !ok {
				return fmt.Errorf("n2 lacks k%d", i)
			}
		}
		if st := co.Hints(); len(st.Pending) != 0 || st.Delivered != 5 {
			return fmt.Errorf("hints %+v, want none pending, 5 delivered", st)
		}
		return nil
	})
}
