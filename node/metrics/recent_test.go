package metrics

import (
	"testing"
	"time"

	"ringkv/internal/testclock"
	"ringkv/node/replica"
)

func TestRecentBuckets(t *testing.T) {
	prev := 0
	for us := int64(1); us < 100_000_000; us = us*11/10 + 1 {
		b := recentBucket(us)
		if b < prev {
			t.Fatalf("bucket of %dµs is %d, below the bucket %d of a smaller latency", us, b, prev)
		}
		prev = b
		up := recentUpper(b)
		d := time.Duration(us) * time.Microsecond
		if b < recentBuckets-1 && (up <= d || float64(up) > 1.25*float64(d)+float64(time.Microsecond)) {
			t.Errorf("%dµs: bucket %d has upper bound %s, want in [%s, %s]", us, b, up, d, time.Duration(1.25*float64(d)))
		}
	}
}

func TestRecentWindow(t *testing.T) {
	clk := testclock.New(time.Unix(1_000_000, 0))
	r := newRecent(clk.Now)
	if p, n := r.quantile(0.99, RecentWindow); p != 0 || n != 0 {
		t.Fatalf("empty: got p99 %s of %d, want 0 of 0", p, n)
	}
	// One second of 1 ms requests with 2% at 50 ms.
	for i := range 1000 {
		d := time.Millisecond
		if i%50 == 0 {
			d = 50 * time.Millisecond
		}
		r.record(d)
		clk.Advance(time.Millisecond)
	}
	p, n := r.quantile(0.99, RecentWindow)
	if n != 1000 {
		t.Errorf("got %d samples, want 1000", n)
	}
	if p < 50*time.Millisecond || p > 63*time.Millisecond {
		t.Errorf("got p99 %s, want 50 ms within a bucket", p)
	}
	if p50, _ := r.quantile(0.5, RecentWindow); p50 < time.Millisecond || p50 > 1250*time.Microsecond {
		t.Errorf("got p50 %s, want 1 ms within a bucket", p50)
	}
	// Half a second later, with no requests since, the second's last half or so is still
	// in the window (1–1.1 s).
	clk.Advance(500 * time.Millisecond)
	if p, n := r.quantile(0.99, RecentWindow); p < 50*time.Millisecond || n < 500 || n > 600 {
		t.Errorf("0.5 s later: got p99 %s of %d, want 50 ms of 500–600", p, n)
	}
	// Over a span of 300 ms only the slots of its last 300–400 ms count: none, then.
	if p, n := r.quantile(0.99, 300*time.Millisecond); p != 0 || n != 0 {
		t.Errorf("0.5 s later, over 300 ms: got p99 %s of %d, want 0 of 0", p, n)
	}
	// 0.7 s more: the slow second has left the window; only what came since counts.
	clk.Advance(700 * time.Millisecond)
	for range 100 {
		r.record(100 * time.Microsecond)
		clk.Advance(time.Millisecond)
	}
	if p, n := r.quantile(0.99, RecentWindow); p > 125*time.Microsecond || n != 100 {
		t.Errorf("1.2 s later: got p99 %s of %d samples, want 100 µs of 100", p, n)
	}
	if _, n := r.quantile(0.99, 50*time.Millisecond); n < 50 || n > 100 {
		t.Errorf("over 50 ms (the current slot and the one before): got %d samples, want 50–100", n)
	}
	// Idle for longer than the window: nothing.
	clk.Advance(2 * time.Second)
	if p, n := r.quantile(0.99, RecentWindow); p != 0 || n != 0 {
		t.Errorf("idle: got p99 %s of %d, want 0 of 0", p, n)
	}
}

func TestRecentP99ByRole(t *testing.T) {
	reg := New(DefaultConfig())
	for range 100 {
		reg.ObserveOp(replica.OpGet, replica.RoleCoordinator, 2*time.Millisecond, nil)
		reg.ObserveOp(replica.OpPut, replica.RoleReplica, 20*time.Millisecond, nil)
	}
	if p, n := reg.RecentP99(replica.RoleCoordinator); n != 100 || p < 2*time.Millisecond || p > 3*time.Millisecond {
		t.Errorf("coordinator: got p99 %s of %d, want 2 ms of 100", p, n)
	}
	if p, n := reg.RecentP99(replica.RoleReplica); n != 100 || p < 20*time.Millisecond || p > 25*time.Millisecond {
		t.Errorf("replica: got p99 %s of %d, want 20 ms of 100", p, n)
	}
	if p, n := reg.RecentP99(replica.NumRoles); p != 0 || n != 0 {
		t.Errorf("unknown role: got %s of %d, want 0 of 0", p, n)
	}
}

func BenchmarkRecentRecord(b *testing.B) {
	r := newRecent(nil)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.record(1500 * time.Microsecond)
		}
	})
}
