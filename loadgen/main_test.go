package loadgen

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if serveNoop() {
		return
	}
	goleak.VerifyTestMain(m)
}
