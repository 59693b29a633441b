// Package spin keeps a test's machine busy the way a shared machine is: other processes
// spinning on every core, so that the code under test runs slow but alive.
package spin

import (
	"os/exec"
	"runtime"
	"testing"
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
