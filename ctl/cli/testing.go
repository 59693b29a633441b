package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"ringkv/proto/kvpb"
)

// ExecuteTest runs cmd with args under a root that maps flag errors to usage errors, as
// kvctl's does, writing to ios. For tests of one command.
func ExecuteTest(cmd *cobra.Command, ios *IOStreams, args ...string) error {
	root := &cobra.Command{Use: "kvctl", SilenceUsage: true, SilenceErrors: true}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageErrorf("%s", err) })
	root.AddCommand(cmd)
	root.SetArgs(append([]string{cmd.Name()}, args...))
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	return root.ExecuteContext(context.Background())
}

// TestAdminDeps returns AdminDeps on ios whose Admin is admin, for tests: --addr is
// 127.0.0.1:9091, the timeout a second.
func TestAdminDeps(ios *IOStreams, admin func(addr string) (kvpb.AdminClient, error), jsonOut bool) AdminDeps {
	return AdminDeps{
		IO:      ios,
		Admin:   admin,
		JSON:    func() bool { return jsonOut },
		Addr:    func() string { return "127.0.0.1:9091" },
		Timeout: time.Second,
	}
}
