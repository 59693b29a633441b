package ctl

import (
	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
)

// commands lists kvctl's top-level commands. Each lives in ctl/cmd/<noun>.
func commands(f *cli.Factory) []*cobra.Command {
	return []*cobra.Command{}
}
