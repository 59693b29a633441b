package tui

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"ringkv/ctl/cli"
)

func TestNewCmdTUIFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		tty      bool
		wantErr  error
		wantRO   bool
		wantSeed int
	}{
		{name: "not a terminal", args: nil, tty: false, wantErr: cli.ErrUsage},
		{name: "readonly", args: []string{"--readonly"}, tty: true, wantRO: true},
		{name: "seeds", args: []string{"--seeds", "a:1,b:2"}, tty: true, wantSeed: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cli.Test()
			ios.InTTY, ios.OutTTY = tt.tty, tt.tty
			var got *Options
			cmd := NewCmdTUI(cli.NewFactory(ios), func(o *Options) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			if got.Readonly != tt.wantRO || len(got.Seeds) != tt.wantSeed {
				t.Errorf("got readonly %v seeds %v, want %v and %d seeds", got.Readonly, got.Seeds, tt.wantRO, tt.wantSeed)
			}
		})
	}
}

// TestHelp: tui --help shows examples, and no flag's value name is taken from backticks in
// its usage ("--bench-keys kvctl bench fill").
func TestHelp(t *testing.T) {
	ios, _, _, _ := cli.Test()
	cmd := NewCmdTUI(cli.NewFactory(ios), func(*Options) error { return nil })
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for _, want := range []string{"Examples:", "--addr 10.0.0.1:9090,10.0.0.2:9090", "--bench-keys int"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "--seeds") {
		t.Errorf("help shows the deprecated --seeds:\n%s", help)
	}
}
