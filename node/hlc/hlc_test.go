package hlc

import (
	"errors"
	"sync"
	"testing"
	"time"

	"ringkv/internal/testclock"
)

var base = time.UnixMilli(1_700_000_000_000)

func ts(ms int64, logical uint64) uint64 { return uint64(ms)<<logicalBits | logical }

func TestNowFollowsWallClock(t *testing.T) {
	wall := testclock.New(base)
	c := New(wall.Now)
	ms := base.UnixMilli()

	steps := []struct {
		name string
		wall time.Time
		want uint64
	}{
		{"first reading", base, ts(ms, 0)},
		{"same millisecond bumps logical", base, ts(ms, 1)},
		{"sub-millisecond advance bumps logical", base.Add(500 * time.Microsecond), ts(ms, 2)},
		{"wall clock advances resets logical", base.Add(10 * time.Millisecond), ts(ms+10, 0)},
		{"wall clock goes backwards", base.Add(-time.Hour), ts(ms+10, 1)},
		{"still behind", base.Add(5 * time.Millisecond), ts(ms+10, 2)},
		{"wall clock catches up", base.Add(11 * time.Millisecond), ts(ms+11, 0)},
	}
	for _, s := range steps {
		wall.Set(s.wall)
		if got := c.Now(); got != s.want {
			t.Fatalf("%s: got %#x, want %#x", s.name, got, s.want)
		}
	}
}

func TestLogicalOverflowCarries(t *testing.T) {
	wall := testclock.New(base)
	c := New(wall.Now)
	ms := base.UnixMilli()
	var prev uint64
	for i := 0; i < 1<<logicalBits+3; i++ {
		got := c.Now()
		if got <= prev {
			t.Fatalf("step %d: got %#x, want > %#x", i, got, prev)
		}
		prev = got
	}
	if want := ts(ms+1, 2); prev != want {
		t.Fatalf("after overflow: got %#x, want %#x", prev, want)
	}
}

func TestUpdate(t *testing.T) {
	ms := base.UnixMilli()
	tests := []struct {
		name   string
		local  uint64 // issued by Now before Update
		remote uint64
		want   uint64 // next Now after Update, wall clock unchanged at base
	}{
		{"remote ahead", ts(ms, 0), ts(ms+100, 7), ts(ms+100, 8)},
		{"remote behind", ts(ms, 0), ts(ms-100, 7), ts(ms, 1)},
		{"remote equal", ts(ms, 0), ts(ms, 0), ts(ms, 1)},
		{"remote same ms higher logical", ts(ms, 0), ts(ms, 9), ts(ms, 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(func() time.Time { return base })
			if got := c.Now(); got != tt.local {
				t.Fatalf("local: got %#x, want %#x", got, tt.local)
			}
			c.Update(tt.remote)
			if got := c.Now(); got != tt.want {
				t.Fatalf("after Update: got %#x, want %#x", got, tt.want)
			}
		})
	}
}

func TestNowMonotonicUnderConcurrency(t *testing.T) {
	wall := testclock.New(base)
	c := New(wall.Now)
	const goroutines, perG = 8, 2000

	results := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]uint64, 0, perG)
			for i := range perG {
				switch {
				case g == 0 && i%100 == 0: // wall clock jumps around, backwards too
					wall.Set(base.Add(time.Duration(i%300-150) * time.Millisecond))
				case g == 1 && i%50 == 0:
					c.Update(ts(base.UnixMilli()+int64(i), 3))
				}
				out = append(out, c.Now())
			}
			results[g] = out
		}()
	}
	wg.Wait()

	seen := make(map[uint64]bool, goroutines*perG)
	for g, out := range results {
		for i, v := range out {
			if i > 0 && v <= out[i-1] {
				t.Fatalf("goroutine %d step %d: got %#x, want > %#x", g, i, v, out[i-1])
			}
			if seen[v] {
				t.Fatalf("goroutine %d step %d: timestamp %#x issued twice", g, i, v)
			}
			seen[v] = true
		}
	}
}

func TestPhysical(t *testing.T) {
	tests := []struct {
		ts   uint64
		want time.Time
	}{
		{ts(base.UnixMilli(), 0), base},
		{ts(base.UnixMilli(), 0xffff), base},
		{0, time.UnixMilli(0)},
	}
	for _, tt := range tests {
		if got := Physical(tt.ts); !got.Equal(tt.want) {
			t.Errorf("Physical(%#x): got %v, want %v", tt.ts, got, tt.want)
		}
	}
}

func TestNewNilUsesWallClock(t *testing.T) {
	before := time.Now().Add(-time.Millisecond)
	got := Physical(New(nil).Now())
	if got.Before(before) || got.After(time.Now().Add(time.Millisecond)) {
		t.Fatalf("got %v, want about %v", got, before)
	}
}

// A timestamp further ahead than MaxOffset is refused, counted and never adopted; one
// within the bound is merged.
func TestMaxOffset(t *testing.T) {
	wall := time.Unix(1_700_000_000, 0)
	c := New(func() time.Time { return wall }, MaxOffset(500*time.Millisecond))
	ahead := func(d time.Duration) uint64 { return physicalTS(wall.Add(d)) }
	tests := []struct {
		name  string
		ahead time.Duration
		ok    bool
	}{
		{"behind", -time.Hour, true},
		{"within the bound", 400 * time.Millisecond, true},
		{"at the bound", 500 * time.Millisecond, true},
		{"past the bound", 501 * time.Millisecond, false},
		{"a year ahead", 365 * 24 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, rejected := c.Now(), c.Rejected()
			err := c.Update(ahead(tt.ahead))
			if got := err == nil; got != tt.ok {
				t.Fatalf("Update(+%v) error = %v, want ok=%v", tt.ahead, err, tt.ok)
			}
			if !tt.ok {
				if !errors.Is(err, ErrClockOffset) {
					t.Errorf("got %v, want %v", err, ErrClockOffset)
				}
				if got := c.Rejected() - rejected; got != 1 {
					t.Errorf("rejected %d, want 1", got)
				}
				if now := c.Now(); Physical(now).Sub(Physical(before)) > time.Second {
					t.Errorf("the clock jumped to %v after a refused timestamp", Physical(now))
				}
			}
		})
	}
	if err := New(nil).Check(ahead(365 * 24 * time.Hour)); err != nil {
		t.Errorf("unbounded clock: Check = %v, want nil", err)
	}
}

// The monitor blames this node's clock only when most peers it measured are off by more than
// the bound, allowing for each measurement's uncertainty.
func TestMonitorCheck(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	observe := func(m *Monitor, peer string, offset, rtt time.Duration) {
		m.Observe(peer, now.Add(-rtt), now, now.Add(-rtt/2+offset))
	}
	tests := []struct {
		name    string
		offsets map[string]time.Duration
		rtt     time.Duration
		fault   bool
	}{
		{"no measurements", nil, 0, false},
		{"all close", map[string]time.Duration{"a": 10 * time.Millisecond, "b": -20 * time.Millisecond}, time.Millisecond, false},
		{"one peer far ahead: its clock, not ours", map[string]time.Duration{"a": time.Hour, "b": 0, "c": 0}, time.Millisecond, false},
		{"every peer far ahead: ours is behind", map[string]time.Duration{"a": time.Hour, "b": time.Hour}, time.Millisecond, true},
		{"two of three far behind", map[string]time.Duration{"a": -2 * time.Second, "b": -3 * time.Second, "c": 0}, time.Millisecond, true},
		{"beyond the bound only within the uncertainty", map[string]time.Duration{"a": 600 * time.Millisecond}, 400 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMonitor(500*time.Millisecond, func() time.Time { return now })
			for p, o := range tt.offsets {
				observe(m, p, o, tt.rtt)
			}
			err := m.Check()
			if got := err != nil; got != tt.fault {
				t.Fatalf("Check() = %v, want fault=%v", err, tt.fault)
			}
			if tt.fault && !errors.Is(err, ErrClockOffset) {
				t.Errorf("got %v, want %v", err, ErrClockOffset)
			}
			for p, want := range tt.offsets {
				if got := m.Offsets()[p].Offset; got != want {
					t.Errorf("offset of %s = %v, want %v", p, got, want)
				}
			}
		})
	}
	// A measurement goes stale.
	m := NewMonitor(500*time.Millisecond, func() time.Time { return now.Add(time.Hour) })
	observe(m, "a", time.Hour, time.Millisecond)
	if err := m.Check(); err != nil {
		t.Errorf("Check with a stale measurement = %v, want nil", err)
	}
}

// BenchmarkMonitorCheck: the clock check every write makes, with two peers measured.
func BenchmarkMonitorCheck(b *testing.B) {
	m := NewMonitor(500*time.Millisecond, nil)
	now := time.Now()
	m.Observe("n2", now, now.Add(time.Millisecond), now)
	m.Observe("n3", now, now.Add(time.Millisecond), now)
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
