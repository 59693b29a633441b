// Package demo holds `kvctl demo`: a cluster inside the kvctl process.
package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/node"
)

// Options are demo's flags.
type Options struct {
	IO       *cli.IOStreams
	Headless bool
	Nodes    int
	Replicas int
	// Ready, when set, is called with the running cluster (tests use it to stop the demo).
	Ready func(*node.LocalCluster)
}

// NewCmdDemo returns `kvctl demo`. runF replaces the run step in tests.
func NewCmdDemo(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Nodes: 3, Replicas: 3}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a 3-node cluster inside this process on free loopback ports, until Ctrl-C",
		Long: `demo starts founders n1..n3 in this process on free 127.0.0.1 ports, with badger in a
temporary directory that is removed on exit, prints every node's HTTP and gRPC addresses and
serves until Ctrl-C. --headless serves without opening the console.`,
		Example: `  kvctl demo --headless`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Nodes < 1 || o.Nodes > 16 {
				return cli.UsageErrorf("--nodes %d: want 1..16", o.Nodes)
			}
			if o.Replicas < 1 {
				return cli.UsageErrorf("--replicas %d: want at least 1", o.Replicas)
			}
			if runF != nil {
				return runF(o)
			}
			return Run(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Headless, "headless", false, "serve without opening the console")
	cmd.Flags().IntVar(&o.Nodes, "nodes", o.Nodes, "number of nodes")
	cmd.Flags().IntVar(&o.Replicas, "replicas", o.Replicas, "replication factor")
	return cmd
}

// Run starts the cluster, prints how to reach it and serves until ctx ends.
func Run(ctx context.Context, o *Options) (err error) {
	if !o.Headless {
		fmt.Fprintln(o.IO.ErrOut, "kvctl demo: the console is not built yet; serving headless (as --headless)")
	}
	dir, err := os.MkdirTemp("", "ringkv-demo-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	logger := slog.New(slog.NewTextHandler(o.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	base := node.DefaultConfig()
	base.Replicas = o.Replicas
	c, err := node.StartLocalCluster(ctx, o.Nodes, base, dir, logger)
	if err != nil {
		return fmt.Errorf("start demo cluster: %w", err)
	}
	defer func() { err = errors.Join(err, c.Close()) }()

	t := cli.NewTable(o.IO, "NODE", "HTTP", "GRPC", "ADMIN")
	for i := range c.Len() {
		a := c.Node(i).Addrs()
		t.Row(c.Node(i).ID(), "http://"+a.HTTP, a.GRPC, "http://"+a.Admin)
	}
	fmt.Fprintf(o.IO.Out, "ringkv demo: %d nodes, replicas %d, data in %s (removed on exit)\n", c.Len(), o.Replicas, dir)
	if err := t.Render(); err != nil {
		return err
	}
	a := c.Node(0).Addrs()
	fmt.Fprintf(o.IO.Out, `
Try it:
  curl -X PUT -d hello 'http://%[1]s/v0/entity?id=greeting'
  curl 'http://%[1]s/v0/entity?id=greeting'
  kvctl --addr %[2]s status
  kvctl --addr %[2]s get greeting
Ctrl-C stops the cluster.
`, a.HTTP, a.GRPC)
	if o.Ready != nil {
		o.Ready(c)
	}
	<-ctx.Done()
	fmt.Fprintln(o.IO.ErrOut, "kvctl demo: stopping")
	return nil
}
