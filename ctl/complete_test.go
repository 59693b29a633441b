package ctl

import (
	"context"
	"strings"
	"testing"

	"ringkv/ctl/cli"
)

// TestCompletion: the shell completes node ids from the ring (ring remove ID, --node) and
// profile kinds, through cobra's __complete.
func TestCompletion(t *testing.T) {
	addr := startNode(t)
	tests := []struct {
		args []string
		want []string // lines of the completion, before the directive
	}{
		{[]string{"ring", "remove", ""}, []string{"n1\tUP " + addr}},
		{[]string{"ring", "drain", "n"}, []string{"n1\tUP " + addr}},
		{[]string{"ring", "remove", "n1", ""}, nil},
		{[]string{"pprof", "cpu", "--node", ""}, []string{"n1\tUP " + addr}},
		{[]string{"repair", "--node", ""}, []string{"n1\tUP " + addr}},
		{[]string{"repair", "plan", "--node", "n"}, []string{"n1\tUP " + addr}},
		{[]string{"pprof", "m"}, []string{"mutex"}},
		{[]string{"bench", "--profile", "he"}, []string{"heap"}},
		{[]string{"-o", ""}, []string{"table", "json"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ios, _, out, errOut := cli.Test()
			if code := Run(context.Background(), ios, append([]string{"__complete", "--addr", addr}, tt.args...)); code != 0 {
				t.Fatalf("got exit %d (%s), want 0", code, errOut)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			got := lines[:len(lines)-1] // the last line is the directive, ":4"
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got completions %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCompleteVnodes: kvctl repair --vnode completes with the ring's tokens, as kvctl ring
// show prints them, each described by its owner.
func TestCompleteVnodes(t *testing.T) {
	addr := startNode(t)
	ios, _, out, errOut := cli.Test()
	if code := Run(context.Background(), ios, []string{"__complete", "--addr", addr, "repair", "--vnode", ""}); code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	got := lines[:len(lines)-1]
	if len(got) != 8 {
		t.Fatalf("got %d completions %q, want the 8 vnodes of n1", len(got), got)
	}
	for _, l := range got {
		tok, desc, _ := strings.Cut(l, "\t")
		if len(tok) != 16 || desc != "vnode of n1" {
			t.Errorf("got completion %q, want 16 hex digits and \"vnode of n1\"", l)
		}
	}
}
