package server

import (
	"testing"

	"go.uber.org/goleak"

	"ringkv/internal/leaktest"
)

// TestMain fails the package if a test leaves a goroutine behind: a stream, a pacer or a
// handler the server did not stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leaktest.NodeLibraries...)
}
