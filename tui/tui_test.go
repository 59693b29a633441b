package tui

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"ringkv/proto/kvpb"
)

var fixedNow = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

const demoHint = "3-node demo cluster: a zipf load runs in the background · press ? for keys"

// console starts the console on the fake source at w×h with a fixed 256-colour profile and waits
// until every scripted sample, the status and the ring have been handled.
func console(t *testing.T, w, h int) (*teatest.TestModel, *FakeSource) {
	t.Helper()
	return consoleOf(t, w, h, func(f *FakeSource) Source { return f }, nil)
}

// consoleOf is console on the source wrap makes of the fake one; ready, when set, must also
// hold of the model before the console is handed over.
func consoleOf(t *testing.T, w, h int, wrap func(*FakeSource) Source, ready func(Model) bool) (*teatest.TestModel, *FakeSource) {
	t.Helper()
	src := NewFakeSource()
	t.Cleanup(src.Close)
	var stats, status, ring, change atomic.Int32
	var isReady atomic.Bool
	isReady.Store(ready == nil)
	filter := func(m tea.Model, msg tea.Msg) tea.Msg {
		if mm, ok := m.(Model); ok && ready != nil && ready(mm) {
			isReady.Store(true)
		}
		switch msg.(type) {
		case StatsMsg:
			stats.Add(1)
		case StatusMsg:
			status.Add(1)
		case RingMsg:
			ring.Add(1)
		case ChangeMsg:
			change.Add(1)
		}
		return msg
	}
	m := New(Options{Source: wrap(src), Actions: FakeActions{}, Hint: demoHint, Now: func() time.Time { return fixedNow }})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.ANSI256), tea.WithFilter(filter)))
	seenN3 := false
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		seenN3 = seenN3 || bytes.Contains(b, []byte("n3"))
		return stats.Load() == FakeNodes*FakeSamples && status.Load() > 0 && ring.Load() > 0 && change.Load() > 0 && seenN3 && isReady.Load()
	}, teatest.WithDuration(20*time.Second)) // a deadline, not a timing: -race on a busy machine is slow
	return tm, src
}

// finalScreen quits and returns the last screen, downsampled to the fixed profile.
func finalScreen(t *testing.T, tm *teatest.TestModel, p colorprofile.Profile) []byte {
	t.Helper()
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	fm, ok := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(Model)
	if !ok {
		t.Fatalf("got final model %T, want Model", fm)
	}
	var buf bytes.Buffer
	w := &colorprofile.Writer{Forward: &buf, Profile: p}
	if _, err := w.WriteString(fm.Render()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func waitText(t *testing.T, tm *teatest.TestModel, s string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(s)) }, teatest.WithDuration(20*time.Second))
}

func TestGolden(t *testing.T) {
	sizes := []struct{ w, h int }{{80, 24}, {160, 48}}
	screens := []struct {
		name  string
		keys  string
		want  string // text that shows the screen is drawn
		extra func(*testing.T, *teatest.TestModel)
	}{
		{name: "overview", want: ""},
		{name: "heatmap", keys: "2", want: "log scale"},
		{name: "help", keys: "?", want: "press any key to close"},
		{name: "confirm-drain", keys: "d", want: "y/enter confirm"},
		{name: "changes", keys: "3", want: "Ranges"},
	}
	for _, sz := range sizes {
		for _, sc := range screens {
			t.Run(sc.name+"-"+itoa(sz.w)+"x"+itoa(sz.h), func(t *testing.T) {
				tm, _ := console(t, sz.w, sz.h)
				if sc.keys != "" {
					tm.Type(sc.keys)
					waitText(t, tm, sc.want)
				}
				teatest.RequireEqualOutput(t, finalScreen(t, tm, colorprofile.ANSI256))
			})
		}
	}
}

// TestGoldenAfterDrain: once n3 was drained, the console lists the ring's two nodes, their
// shares add to 100% and the title counts two nodes.
func TestGoldenAfterDrain(t *testing.T) {
	tm, src := console(t, 80, 24)
	src.Drain("n3")
	tm.Send(RefreshMsg{})
	waitText(t, tm, "n3 left the ring")
	teatest.RequireEqualOutput(t, finalScreen(t, tm, colorprofile.ANSI256))
}

// TestGoldenRepair: a repair in flight shows in the overview's alerts and, like a ring
// change, on the changes screen: ranges done, rate, ETA, what was streamed, the pairs that
// differ; its start is in the event log.
func TestGoldenRepair(t *testing.T) {
	for _, sc := range []struct {
		name string
		keys string
		w, h int
	}{{"overview", "", 80, 24}, {"changes", "3", 80, 24}, {"changes", "3", 160, 48}} {
		t.Run(sc.name+"-"+itoa(sc.w)+"x"+itoa(sc.h), func(t *testing.T) {
			tm, src := console(t, sc.w, sc.h)
			src.Repair(fakeRepair())
			tm.Send(RefreshMsg{})
			waitText(t, tm, "repair #2 on n1")
			if sc.keys != "" {
				tm.Type(sc.keys)
				waitText(t, tm, "Repair #2 on n1")
			}
			teatest.RequireEqualOutput(t, finalScreen(t, tm, colorprofile.ANSI256))
		})
	}
}

// TestGoldenPaused: a paused change says who paused it, when, for how long and why, and what
// it costs writes, in the overview's alerts and on the changes screen; P asks to resume it.
func TestGoldenPaused(t *testing.T) {
	for _, sc := range []struct {
		name, keys, want string
	}{{"overview", "", "PAUSED by alice@ops1"}, {"changes", "3", "Change #3"}, {"confirm-resume", "P", "y/enter confirm"}} {
		t.Run(sc.name+"-80x24", func(t *testing.T) {
			tm, _ := console(t, 80, 24)
			tm.Send(ChangeMsg{Progress: fakePausedChange("alice@ops1", "p99 spike")})
			waitText(t, tm, "p99 spike")
			if sc.keys != "" {
				tm.Type(sc.keys)
				waitText(t, tm, sc.want)
			}
			teatest.RequireEqualOutput(t, finalScreen(t, tm, colorprofile.ANSI256))
		})
	}
}

// TestGoldenStalled: a move with no progress for its receiver's --move-stall-after shows in
// the overview's alerts and on the changes screen with its cause, naming the source.
func TestGoldenStalled(t *testing.T) {
	for _, sc := range []struct{ name, keys string }{{"overview", ""}, {"changes", "3"}} {
		t.Run(sc.name+"-80x24", func(t *testing.T) {
			tm, src := console(t, 80, 24)
			src.SendChange(fakeStalledChange())
			if sc.keys != "" {
				tm.Type(sc.keys)
			}
			waitText(t, tm, "source n2 unreachable")
			teatest.RequireEqualOutput(t, finalScreen(t, tm, colorprofile.ANSI256))
		})
	}
}

// TestPauseKey: P on a streaming change asks to pause it and, confirmed, shows it PAUSED.
func TestPauseKey(t *testing.T) {
	tm, _ := console(t, 80, 24)
	tm.Type("P")
	waitText(t, tm, "Pause change #3")
	tm.Type("y")
	waitText(t, tm, "PAUSED by kvctl@console")
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
}

// TestRepairPauseKey: R on a running repair asks to pause it and, confirmed, shows it PAUSED;
// R again asks to resume it.
func TestRepairPauseKey(t *testing.T) {
	tm, src := console(t, 80, 24)
	src.Repair(fakeRepair())
	tm.Send(RefreshMsg{})
	waitText(t, tm, "repair #2 on n1")
	tm.Type("R")
	waitText(t, tm, "Pause repair")
	tm.Type("y")
	tm.Type("3")
	waitText(t, tm, "PAUSED by kvctl@console")
	p := fakeRepair()
	p.Paused = &kvpb.ChangePause{By: "kvctl@console", PausedUnix: fixedNow.Unix(), Reason: ConsolePauseReason}
	src.Repair(p)
	tm.Send(RefreshMsg{})
	tm.Type("R")
	waitText(t, tm, "Resume repair")
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenRepairPaused: a paused repair says so on the changes screen, as a paused ring
// change does: who, when, for how long, why; its pause is in the event log.
func TestGoldenRepairPaused(t *testing.T) {
	tm, src := console(t, 80, 24)
	src.Repair(fakeRepair())
	tm.Send(RefreshMsg{})
	waitText(t, tm, "repair #2 on n1")
	p := fakeRepair()
	p.Paused = &kvpb.ChangePause{By: "alice@ops1", PausedUnix: fixedNow.Add(-62 * time.Second).Unix(), Reason: "backup window"}
	src.Repair(p)
	tm.Send(RefreshMsg{})
	tm.Type("3")
	waitText(t, tm, "PAUSED by alice@ops1")
	teatest.RequireEqualOutput(t, finalScreen(t, tm, colorprofile.ANSI256))
}

// TestGolden16 draws the heatmap on a 16-colour terminal: levels stay distinct by glyph.
func TestGolden16(t *testing.T) {
	tm, _ := console(t, 80, 24)
	tm.Type("2")
	waitText(t, tm, "log scale")
	teatest.RequireEqualOutput(t, finalScreen(t, tm, colorprofile.ANSI))
}

func TestQuitRestoresTerminal(t *testing.T) {
	tm, _ := console(t, 80, 24)
	tm.Type("q")
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	out, err := readAll(tm.FinalOutput(t))
	if err != nil {
		t.Fatal(err)
	}
	// The alternate screen (entered before console() returned) is left on quit.
	if leave := "\x1b[?1049l"; !strings.Contains(out, leave) {
		t.Errorf("got output %q after quit, want it to leave the alternate screen", out)
	}
}

func itoa(i int) string { return fmtInt(i) }
