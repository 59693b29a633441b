// Package eventually is the tests' one way to wait for a state: poll a condition with a
// deadline (CockroachDB's SucceedsSoon), never sleep a fixed time and hope.
package eventually

import (
	"testing"
	"time"
)

// Succeeds calls fn until it returns nil. Past d it fails the test with fn's last error.
// Polls start every 5 ms and back off to every 100 ms.
func Succeeds(t testing.TB, d time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	wait := 5 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", d, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}
