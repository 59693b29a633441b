package ctl

import (
	"fmt"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/internal/version"
)

// versionJSON is `kvctl version -o json`.
type versionJSON struct {
	Version  string `json:"version"`
	Module   string `json:"module"`
	Revision string `json:"revision"`
	Modified bool   `json:"modified"`
	Time     string `json:"time"`
	Go       string `json:"go"`
}

// newCmdVersion returns `kvctl version`: the build of kvctl (the nodes' builds are in
// kvctl status).
func newCmdVersion(f *cli.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kvctl's version: module version and VCS revision (kvctl status shows the nodes')",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			in := version.Get()
			if f.JSON() {
				return cli.PrintJSON(f.IO.Out, versionJSON{Version: in.Short(), Module: in.Module, Revision: in.Revision,
					Modified: in.Modified, Time: in.Time, Go: in.Go})
			}
			_, err := fmt.Fprintf(f.IO.Out, "kvctl %s\n", in)
			return err
		},
	}
}
