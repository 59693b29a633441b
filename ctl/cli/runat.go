package cli

import (
	"context"
	"slices"

	"github.com/spf13/cobra"
)

// RunAt runs the command newCmd builds on a Factory of test streams (see Test) aimed at
// addr, with args, as kvctl would: "-o FORMAT" among the args sets the output format, as
// kvctl's root flag does. It returns what the command printed on stdout and on stderr. For
// the commands' tests against a real cluster.
func RunAt(ctx context.Context, addr string, newCmd func(*Factory) *cobra.Command, args ...string) (out, errOut string, err error) {
	ios, _, stdout, stderr := Test()
	f := NewFactory(ios)
	defer f.Close()
	f.Addr = addr
	if i := slices.Index(args, "-o"); i >= 0 && i+1 < len(args) {
		f.Output = args[i+1]
		args = slices.Delete(slices.Clone(args), i, i+2)
	}
	cmd := newCmd(f)
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err = cmd.ExecuteContext(ctx)
	return stdout.String(), stderr.String(), err
}
