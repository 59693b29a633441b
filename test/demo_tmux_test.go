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

// TestDemoInTmux runs the built `kvctl demo` in a real terminal (tmux): the console opens on
// the cluster with its heatmap, ? shows the help, q quits with exit status 0, the alternate
// screen is left (the pane shows the shell's output again) and the data directory is gone.
func TestDemoInTmux(t *testing.T) {
	t.Parallel()
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
	script := "cd " + dir + " && " + bin + " demo --profile-dir " + dir +
		"; echo EXIT=$? > " + exitFile + "; echo DEMO-DONE; sleep 600"
	x.must("-f", "/dev/null", "new-session", "-d", "-s", "demo", "-x", "100", "-y", "30", script)
	t.Cleanup(func() { _, _ = x.run("kill-server") })

	x.waitScreen("console with node names and heatmap", 60*time.Second, func(s string) bool {
		return strings.Contains(s, "log scale") && strings.Contains(s, "n1 ") && strings.Contains(s, "n2 ") && strings.Contains(s, "n3 ")
	})
	x.must("send-keys", "-t", "demo", "?")
	x.waitScreen("help", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "press any key to close") && strings.Contains(s, "drain selected node")
	})
	x.must("send-keys", "-t", "demo", "q")
	var code []byte
	eventually.Succeeds(t, 30*time.Second, func() error {
		b, err := os.ReadFile(exitFile)
		if err != nil || len(b) == 0 {
			return fmt.Errorf("kvctl demo did not exit after q; pane:\n%s", x.screen())
		}
		code = b
		return nil
	})
	if got := strings.TrimSpace(string(code)); got != "EXIT=0" {
		t.Errorf("got %s, want EXIT=0; pane:\n%s", got, x.screen())
	}
	s := x.waitScreen("shell after the console", 5*time.Second, func(s string) bool { return strings.Contains(s, "DEMO-DONE") })
	for _, console := range []string{"log scale", "press any key to close", "1 overview"} {
		if strings.Contains(s, console) {
			t.Errorf("pane still shows the console (%q) after exit, want the alternate screen left:\n%s", console, s)
		}
	}
	m := regexp.MustCompile(`data in (\S+) \(removed on exit\)`).FindStringSubmatch(strings.ReplaceAll(s, "\n", ""))
	if m == nil {
		t.Fatalf("pane lacks the demo's data directory line:\n%s", s)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("data dir %s: got stat error %v, want it removed", m[1], err)
	}
}
