package stream_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a pull's receiver that
// outlived its stream.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
