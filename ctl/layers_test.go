package ctl

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// listed is what `go list -json` says of one package.
type listed struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

// listPackages runs `go list -json` on patterns (every package below ctl and tui).
func listPackages(t *testing.T, patterns ...string) []listed {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", append([]string{"list", "-json"}, patterns...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %v: no packages", patterns)
	}
	return pkgs
}

// nodeEngines are the node's storage engine and consensus library: an operator's console
// must build without them.
var nodeEngines = []string{"github.com/dgraph-io/badger/v4", "github.com/hashicorp/raft"}

// embedsNodes are the packages that run nodes inside kvctl, and so build with the engine:
// `kvctl demo` starts a cluster in its own process, and the root command tree includes demo.
var embedsNodes = []string{"ringkv/ctl", "ringkv/ctl/cmd/demo"}

// TestConsoleBuildsWithoutTheNode checks that kvctl's commands, its shared packages and the
// console do not depend on badger or raft (the packages that embed nodes aside), and that
// ctl/present and the console import nothing of the repository but the proto, ctl and tui
// packages: they speak the wire, not the node's internals.
func TestConsoleBuildsWithoutTheNode(t *testing.T) {
	for _, p := range listPackages(t, "ringkv/ctl/...", "ringkv/tui/...") {
		if slices.Contains(embedsNodes, p.ImportPath) {
			continue
		}
		for _, dep := range nodeEngines {
			if slices.Contains(p.Deps, dep) {
				t.Errorf("%s depends on %s: got it among its dependencies, want it absent", p.ImportPath, dep)
			}
		}
		if p.ImportPath != "ringkv/ctl/present" && !strings.HasPrefix(p.ImportPath, "ringkv/tui") {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "ringkv/") && !strings.HasPrefix(imp, "ringkv/proto/") &&
				!strings.HasPrefix(imp, "ringkv/ctl/") && !strings.HasPrefix(imp, "ringkv/tui/") {
				t.Errorf("%s imports %s: want only the proto, ctl and tui packages", p.ImportPath, imp)
			}
		}
	}
}

// TestCommandsImportNoCommand checks that no kvctl command package (ctl/cmd/X) imports
// another, in its code or its tests: what two commands share lives in a library (ctl/cli,
// ctl/present, ctl/profile, ctl/follow, tui), and ctl alone assembles the commands.
func TestCommandsImportNoCommand(t *testing.T) {
	const cmds = "ringkv/ctl/cmd/"
	pkgs := listPackages(t, cmds+"...")
	for _, p := range pkgs {
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if strings.HasPrefix(imp, cmds) && imp != p.ImportPath {
				t.Errorf("%s imports the command %s: want shared code in a library", p.ImportPath, imp)
			}
		}
	}
}
