package ctl

import (
	"context"
	"strings"
	"testing"

	"ringkv/ctl/cli"
	"ringkv/internal/version"
)

// TestVersion: kvctl version and kvctl --version print the build on one line.
func TestVersion(t *testing.T) {
	want := "kvctl " + version.Get().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		ios, _, out, errOut := cli.Test()
		if code := Run(context.Background(), ios, args); code != cli.ExitOK {
			t.Errorf("kvctl %s: got exit %d (%s), want 0", args[0], code, errOut)
		}
		if got := out.String(); got != want || !strings.Contains(got, "go1.") {
			t.Errorf("kvctl %s: got %q, want %q", args[0], got, want)
		}
	}
}
