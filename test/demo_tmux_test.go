package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"ringkv/internal/eventually"
)

// demoTmux drives one tmux server on a private socket.
type demoTmux struct {
	t      *testing.T
	socket string
}

func (x demoTmux) run(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-S", x.socket}, args...)...).CombinedOutput()
	return string(out), err
}

func (x demoTmux) must(args ...string) string {
	x.t.Helper()
	out, err := x.run(args...)
	if err != nil {
		x.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (x demoTmux) screen() string {
	out, _ := x.run("capture-pane", "-p", "-t", "demo")
	return out
}

// history is the pane's whole output since it began, its scrollback included, wrapped lines
// joined.
func (x demoTmux) history() string {
	out, _ := x.run("capture-pane", "-p", "-J", "-S", "-", "-t", "demo")
	return out
}

// waitScreen polls the pane until cond holds, failing after d.
func (x demoTmux) waitScreen(what string, d time.Duration, cond func(string) bool) string {
	x.t.Helper()
	var s string
	eventually.Succeeds(x.t, d, func() error {
		if s = x.screen(); !cond(s) {
			return fmt.Errorf("no %s; pane:\n%s", what, s)
		}
		return nil
	})
	return s
}

// startDemo runs the built `kvctl demo args...` in a tmux pane of w×h cells; the shell writes
// kvctl's exit status to the returned file when it ends.
func startDemo(t *testing.T, w, h int, args ...string) (demoTmux, string) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("tmux not installed (.ci/run installs it): %v", err)
		}
		t.Skip("tmux not installed; install it (or run .ci/run) to run the demo end-to-end test")
	}
	dir := t.TempDir()
	bin := buildBins(t).kvctl
	x := demoTmux{t: t, socket: filepath.Join(dir, "tmux.sock")}
	exitFile := filepath.Join(dir, "exit")
	script := "cd " + dir + " && " + bin + " demo --profile-dir " + dir + " " + strings.Join(args, " ") +
		"; echo EXIT=$? > " + exitFile + "; echo DEMO-DONE; sleep 600"
	x.must("-f", "/dev/null", "new-session", "-d", "-s", "demo", "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), script)
	t.Cleanup(func() { _, _ = x.run("kill-server") })
	return x, exitFile
}

// quit presses q and checks that kvctl demo exits with status 0.
func (x demoTmux) quit(exitFile string) {
	x.t.Helper()
	x.must("send-keys", "-t", "demo", "q")
	var code []byte
	eventually.Succeeds(x.t, 30*time.Second, func() error {
		b, err := os.ReadFile(exitFile)
		if err != nil || len(b) == 0 {
			return fmt.Errorf("kvctl demo did not exit after q; pane:\n%s", x.screen())
		}
		code = b
		return nil
	})
	if got := strings.TrimSpace(string(code)); got != "EXIT=0" {
		x.t.Errorf("got %s, want EXIT=0; pane:\n%s", got, x.screen())
	}
}

// TestDemoInTmux runs the built `kvctl demo` in a real terminal (tmux): the console opens on
// the cluster with its heatmap, ? shows the help, q quits with exit status 0, the alternate
// screen is left (the pane shows the shell's output again) and the data directory is gone.
func TestDemoInTmux(t *testing.T) {
	t.Parallel()
	x, exitFile := startDemo(t, 100, 30)

	x.waitScreen("console with node names and heatmap", 60*time.Second, func(s string) bool {
		return strings.Contains(s, "log scale") && strings.Contains(s, "n1 ") && strings.Contains(s, "n2 ") && strings.Contains(s, "n3 ")
	})
	x.must("send-keys", "-t", "demo", "?")
	x.waitScreen("help", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "press any key to close") && strings.Contains(s, "drain selected node")
	})
	x.quit(exitFile)
	s := x.waitScreen("shell after the console", 5*time.Second, func(s string) bool { return strings.Contains(s, "DEMO-DONE") })
	for _, console := range []string{"log scale", "press any key to close", "1 overview"} {
		if strings.Contains(s, console) {
			t.Errorf("pane still shows the console (%q) after exit, want the alternate screen left:\n%s", console, s)
		}
	}
	// From the whole history: what the nodes logged while the console was open follows the
	// line, and can scroll it off the pane (raft's re-elections on a loaded CI machine did).
	h := x.history()
	m := regexp.MustCompile(`data in (\S+) \(removed on exit\)`).FindStringSubmatch(h)
	if m == nil {
		t.Fatalf("pane's history lacks the demo's data directory line:\n%s", h)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("data dir %s: got stat error %v, want it removed", m[1], err)
	}
}

// TestDemoWalkInTmux walks the demo as a newcomer does, in a real terminal: a plans the add of
// the spare n4 (one key) and y starts it; its data streams in (slowly: --change-rate) until P
// and y pause it — the changes view shows the PAUSED line — and P and y resume it, until n4 is
// UP in the overview; x stops n2, which turns DOWN, and X starts it again, UP; q quits with
// status 0.
func TestDemoWalkInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo walk takes 20–60 s; run without -short")
	}
	t.Parallel()
	// 8000 keys of 100–400 B: n4 receives about 1.5 MB, 15 s or more at 100 KB/s.
	x, exitFile := startDemo(t, 160, 48, "--keys", "8000", "--rate", "50", "--change-rate", "100KB/s")
	row := func(id, state string) *regexp.Regexp { return regexp.MustCompile(`(?m)^` + id + `\s+` + state + `\b`) }
	key := func(k string) { x.must("send-keys", "-t", "demo", k) }

	x.waitScreen("console", 60*time.Second, func(s string) bool { return strings.Contains(s, "a add n4") })
	key("1")
	x.waitScreen("founders UP", 10*time.Second, func(s string) bool {
		return row("n1", "UP").MatchString(s) && row("n2", "UP").MatchString(s) && row("n3", "UP").MatchString(s)
	})
	streaming := regexp.MustCompile(`Change #\d+: add n4 .* — streaming`)
	// A refused plan or start is shown, dismissed and tried again, as a person would: at a
	// load average of 60 the start's raft entry did not commit within the console's deadline,
	// and in a fresh-clone CI the plan's NodeInfo calls to n4 and n3 (2 s each, n4's over a
	// connection still being made) ended DeadlineExceeded, which refuses the plan.
	planRefused := regexp.MustCompile(`Plan: add n4.* — refused`)
	refused := func(s string) bool { return strings.Contains(s, "Change refused") || planRefused.MatchString(s) }
	for attempt := 1; ; attempt++ {
		key("a")
		s := x.waitScreen("the plan of adding n4", 20*time.Second, func(s string) bool {
			return strings.Contains(s, "Plan: add n4") && strings.Contains(s, "Start this change?") || planRefused.MatchString(s)
		})
		if !planRefused.MatchString(s) {
			key("y")
			s = x.waitScreen("the change streaming or refused", 20*time.Second, func(s string) bool {
				return streaming.MatchString(s) && strings.Contains(s, "→ n4") || strings.Contains(s, "Change refused")
			})
		}
		if !refused(s) {
			break
		}
		if attempt == 3 {
			t.Fatalf("the add of n4 refused %d times; pane:\n%s", attempt, s)
		}
		t.Logf("attempt %d: the add of n4 refused; pane:\n%s", attempt, s)
		key("Escape")
		x.waitScreen("the refusal dismissed", 10*time.Second, func(s string) bool { return !refused(s) })
	}

	key("P")
	x.waitScreen("the pause confirmation", 10*time.Second, func(s string) bool { return regexp.MustCompile(`Pause change #\d+`).MatchString(s) })
	key("y")
	s := x.waitScreen("the PAUSED line", 20*time.Second, func(s string) bool {
		return strings.Contains(s, "PAUSED by ") && strings.Contains(s, "paused from the console")
	})
	if streaming.MatchString(s) {
		t.Errorf("paused, the changes view still says streaming:\n%s", s)
	}
	key("P")
	x.waitScreen("the resume confirmation", 10*time.Second, func(s string) bool { return regexp.MustCompile(`Resume change #\d+`).MatchString(s) })
	key("y")
	x.waitScreen("the change streaming again, or done", 30*time.Second, func(s string) bool {
		// The event log keeps "PAUSED by"; the change's own PAUSED line (with the reason) goes.
		return !strings.Contains(s, "paused from the console") && regexp.MustCompile(`Change #\d+: add n4 .* — (streaming|handing over|done)`).MatchString(s)
	})
	key("1")
	x.waitScreen("n4 UP in the overview", 90*time.Second, func(s string) bool { return row("n4", "UP").MatchString(s) })

	key("j") // the overview is sorted by node: n1, n2, ...
	key("x")
	x.waitScreen("the stop confirmation", 10*time.Second, func(s string) bool { return strings.Contains(s, "Stop n2") })
	key("y")
	x.waitScreen("n2 DOWN", 20*time.Second, func(s string) bool { return row("n2", "DOWN").MatchString(s) })
	key("X")
	x.waitScreen("the start confirmation", 10*time.Second, func(s string) bool { return strings.Contains(s, "Start n2") })
	key("y")
	// Back means serving again: UP, or GRAY when the machine starves the demo's process (at
	// a load average of ~29 in a fresh-clone CI, n2's calls right after its start were slow
	// enough for a verdict; the console shows GRAY only for a node that is not down).
	s = x.waitScreen("n2 back (UP, or GRAY on a starved machine)", 40*time.Second, func(s string) bool {
		return row("n2", "UP").MatchString(s) || row("n2", "GRAY").MatchString(s)
	})
	for _, ev := range []string{"n2's process stopped", "n2's process started"} {
		if !strings.Contains(s, ev) {
			t.Errorf("pane lacks the event %q:\n%s", ev, s)
		}
	}
	x.quit(exitFile)
}
