package tui

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a source's stream reader,
// a bench, a command still running after its program quit.
func TestMain(m *testing.M) {
	time.Local = time.UTC // goldens draw times as the operator's clock shows them: pin it
	goleak.VerifyTestMain(m,
		// teatest waits for a SIGINT for the rest of the process.
		goleak.IgnoreTopFunction("github.com/charmbracelet/x/exp/teatest/v2.NewTestModel.func2"),
		// bubbletea's pending tea.Tick commands outlive the program by at most one period.
		goleak.IgnoreTopFunction("charm.land/bubbletea/v2.Tick.func1"))
}
