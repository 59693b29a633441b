// Package spin keeps a test's machine busy the way a shared machine is: other processes
// spinning on every core, so that the code under test runs slow but alive; or a test's
// process contended, for its profiles.
package spin

import (
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Cores starts one shell spin loop per core; they are killed when the test ends.
func Cores(t testing.TB) {
	t.Helper()
	for range runtime.NumCPU() {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start spin loop: %v", err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
}

// Contend runs four goroutines that take turns holding one mutex for hold each, until stop
// is closed, and returns once they have stopped: thousands of contention events a second for
// a mutex or block profile to find. rounds, when not nil, counts the critical sections run.
func Contend(stop <-chan struct{}, hold time.Duration, rounds *atomic.Int64) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				time.Sleep(hold)
				mu.Unlock()
				if rounds != nil {
					rounds.Add(1)
				}
			}
		})
	}
	wg.Wait()
}
