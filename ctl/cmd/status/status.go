// Package status holds `kvctl status`.
package status

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/proto/kvpb"
)

// Options are status's flags.
type Options struct {
	IO      *cli.IOStreams
	Admin   func() (kvpb.AdminClient, error)
	JSON    func() bool
	Addr    func() string
	Timeout time.Duration
}

// NewCmdStatus returns `kvctl status`. runF replaces the run step in tests.
func NewCmdStatus(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{
		IO:      f.IO,
		Admin:   func() (kvpb.AdminClient, error) { return f.Admin("") },
		JSON:    f.JSON,
		Addr:    func() string { return f.Addr },
		Timeout: 5 * time.Second,
	}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Every node as the contacted node sees it: state, ops/s, p99, keys, disk, ring epoch",
		Example: `  kvctl status
  kvctl status --addr 10.0.0.2:9090 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Timeout <= 0 {
				return cli.UsageErrorf("--timeout must be positive")
			}
			if runF != nil {
				return runF(o)
			}
			return run(cmd.Context(), o)
		},
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the request")
	return cmd
}

func run(ctx context.Context, o *Options) error {
	c, err := o.Admin()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resp, err := c.Status(ctx, &kvpb.StatusRequest{})
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, resp)
	}
	return Print(o.IO, resp)
}

// Print renders a StatusResponse as the status table.
func Print(ios *cli.IOStreams, resp *kvpb.StatusResponse) error {
	up := 0
	for _, n := range resp.GetNodes() {
		if n.GetError() == "" {
			up++
		}
	}
	fmt.Fprintf(ios.Out, "ring epoch %d, replicas %d, %d/%d nodes answering\n", resp.GetEpoch(), resp.GetReplicas(), up, len(resp.GetNodes()))
	t := cli.NewTable(ios, "NODE", "ADDR", "STATE", "EPOCH", "KEYS", "DISK", "OPS/S", "P99", "NOTE")
	for _, n := range resp.GetNodes() {
		info := n.GetInfo()
		if info == nil {
			t.Row(n.GetId(), n.GetGrpcAddr(), n.GetState(), "-", "-", "-", "-", "-", n.GetError())
			continue
		}
		note := n.GetError()
		if note == "" && info.GetEpoch() != resp.GetEpoch() {
			note = fmt.Sprintf("epoch behind (%d)", info.GetEpoch())
		}
		t.Row(n.GetId(), n.GetGrpcAddr(), n.GetState(), info.GetEpoch(), info.GetKeys(),
			cli.Humanize(info.GetDiskBytes()), fmt.Sprintf("%.1f", info.GetOpsPerSec()), p99(info.GetP99Ms()), note)
	}
	return t.Render()
}

func p99(ms float64) string {
	if ms <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fms", ms)
}
