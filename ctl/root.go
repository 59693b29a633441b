// Package ctl is kvctl: the cobra command tree an operator of a ringkv cluster lives in.
package ctl

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
)

// Main runs kvctl with args (without the program name) and returns the exit code.
func Main(args []string) int {
	ios := cli.System()
	f := cli.NewFactory(ios)
	defer f.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	root := NewRootCmd(f)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintf(ios.ErrOut, "kvctl: %s\n", present.OneLine(err))
	}
	return cli.ExitCode(err)
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
  kvctl get user:1 --ack 1        read it back from one replica`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch f.Output {
			case "table", "json":
			default:
				return cli.UsageErrorf("-o %q: want table or json", f.Output)
			}
			return nil
		},
	}
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.UsageErrorf("%s", err) })
	pf := root.PersistentFlags()
	pf.StringVar(&f.Addr, "addr", f.Addr, "gRPC address of any node (env KVCTL_ADDR)")
	pf.StringVarP(&f.Output, "output", "o", f.Output, "output format: table or json")
	pf.StringVar(&f.CertsDir, "certs-dir", f.CertsDir, "directory of ca.crt, client.crt, client.key: connect with mutual TLS (env KVCTL_CERTS_DIR)")
	pf.StringVar(&f.SecretFile, "secret-file", f.SecretFile, "file holding the cluster secret, for admin calls (env KVCTL_SECRET_FILE)")

	root.AddCommand(commands(f)...)
	return root
}
