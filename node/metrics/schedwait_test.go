package metrics

import (
	"math"
	"testing"
	"time"
)

func TestDeltaQuantile(t *testing.T) {
	buckets := []float64{math.Inf(-1), 0.001, 0.002, 0.004, math.Inf(1)}
	for _, tc := range []struct {
		name     string
		from, to []uint64
		want     time.Duration
	}{
		{"nothing added", []uint64{5, 5, 5, 5}, []uint64{5, 5, 5, 5}, 0},
		{"all under 1 ms", []uint64{0, 0, 0, 0}, []uint64{100, 0, 0, 0}, time.Millisecond},
		{"1% in 2–4 ms", []uint64{10, 0, 0, 0}, []uint64{109, 0, 1, 0}, time.Millisecond},
		{"2% in 2–4 ms", []uint64{10, 0, 0, 0}, []uint64{108, 0, 2, 0}, 4 * time.Millisecond},
		{"the last bucket reports its lower bound", []uint64{0, 0, 0, 0}, []uint64{0, 0, 0, 3}, 4 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := deltaQuantile(tc.from, tc.to, buckets, 0.99); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// SchedWait reads the runtime's histogram: after some wake-ups its p99 is a positive,
// bounded duration.
func TestSchedWait(t *testing.T) {
	w := NewSchedWait(200 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		done := make(chan struct{})
		for range 50 {
			go func() { done <- struct{}{} }()
		}
		for range 50 {
			<-done
		}
		time.Sleep(schedEvery)
		if p := w.P99(); p > 0 {
			if p > 10*time.Second {
				t.Fatalf("got p99 %s, want a bounded wait", p)
			}
			return
		}
	}
	t.Errorf("no wait measured in 5 s of goroutine wake-ups")
}
