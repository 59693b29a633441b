// Package ctl is kvctl: the cobra command tree an operator of a ringkv cluster lives in.
package ctl

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/internal/version"
)

// Main runs kvctl with args (without the program name) and returns the exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return Run(ctx, cli.System(), args)
}

// Run runs kvctl with args on ios, prints a failure as one line on ios.ErrOut and returns
// the exit code (see the root command's help).
func Run(ctx context.Context, ios *cli.IOStreams, args []string) int {
	f := cli.NewFactory(ios)
	defer f.Close()
	root := NewRootCmd(f)
	root.SetArgs(args)
	err := unknownCommand(root, args, root.ExecuteContext(ctx))
	if err != nil {
		fmt.Fprintf(ios.ErrOut, "kvctl: %s\n", present.OneLine(err))
	}
	return cli.ExitCode(err)
}

var unknownRE = regexp.MustCompile(`^unknown command "(.*)" for "(.*?)"`)

// unknownCommand turns cobra's "unknown command" error into a usage error on one line with
// cobra's suggestions: `unknown command "gett" for "kvctl"; did you mean get?`.
func unknownCommand(root *cobra.Command, args []string, err error) error {
	if err == nil {
		return nil
	}
	m := unknownRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	msg := fmt.Sprintf("unknown command %q for %q", m[1], m[2])
	if c, _, ferr := root.Find(args); ferr == nil || c != nil {
		if sugg := c.SuggestionsFor(m[1]); len(sugg) > 0 {
			msg += "; did you mean " + strings.Join(sugg, " or ") + "?"
		}
		msg += fmt.Sprintf(" (%s --help lists them)", c.CommandPath())
	}
	return cli.UsageErrorf("%s", msg)
}

// namedArgs makes every command's argument-count error a usage error that names the
// arguments its Use line takes: "kvctl put takes KEY VALUE: got 1 argument".
func namedArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		namedArgs(sub)
	}
	check := c.Args
	if check == nil {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		switch {
		case err == nil:
			return nil
		case cmd.HasSubCommands() && len(args) > 0:
			return unknownCommand(cmd.Root(), append(strings.Fields(cmd.CommandPath())[1:], args...),
				fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath()))
		}
		want := "no arguments"
		if _, a, ok := strings.Cut(cmd.Use, " "); ok {
			want = a
		}
		return cli.UsageErrorf("%s takes %s: got %d argument%s", cmd.CommandPath(), want, len(args), plural(len(args)))
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// NewRootCmd builds the kvctl command tree on f.
func NewRootCmd(f *cli.Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "kvctl",
		Short: "Operate a ringkv cluster: data, ring changes, load, profiles, console",
		Long: `kvctl talks to any node of a ringkv cluster over gRPC (--addr, or $KVCTL_ADDR).

Start here:
  kvctl demo                      a 3-node cluster in this process, opened in the console
  kvctl status                    every node: state, load, keys, disk, ring epoch
  kvctl put user:1 alice          write a key (any node coordinates)
  kvctl get user:1 --ack 1        read it back from one replica

Exit codes: 0 done, 1 failure (a node unreachable, a run invalid, a node that cannot do
it now: no leader, a stale ring view, a clock offset, a full disk), 2 usage (a bad
command, flag or argument, a key over its limit), 3 refused as unsafe (see --force; a
change or repair already running), 4 not found (get of a missing key, a node that is no
member, no change or repair to act on). A node's answer exits by its reason; the table
is in docs/operations.md ("kvctl exit codes").`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().String(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch f.Output {
			case "table", "json":
			default:
				return cli.UsageErrorf("-o %q: want table or json", f.Output)
			}
			return nil
		},
	}
	root.SetVersionTemplate("kvctl {{.Version}}\n")
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.UsageErrorf("%s", err) })
	pf := root.PersistentFlags()
	pf.StringVar(&f.Addr, "addr", f.Addr, "gRPC address of any node, or several (a,b,c) tried in turn (env KVCTL_ADDR)")
	pf.StringVarP(&f.Output, "output", "o", f.Output, "output format: table or json")
	_ = root.RegisterFlagCompletionFunc("output", cli.CompleteWords("table", "json"))
	pf.StringVar(&f.CertsDir, "certs-dir", f.CertsDir, "directory of ca.crt, client.crt, client.key: connect with mutual TLS (env KVCTL_CERTS_DIR)")
	pf.StringVar(&f.SecretFile, "secret-file", f.SecretFile, "file holding the cluster secret, for admin calls (env KVCTL_SECRET_FILE)")

	root.AddCommand(commands(f)...)
	root.AddCommand(newCmdVersion(f))
	namedArgs(root)
	return root
}
