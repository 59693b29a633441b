// Package kv holds kvctl's one-key commands: get, put, del.
package kv

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// Options are the flags and arguments of get, put and del.
type Options struct {
	IO *cli.IOStreams
	KV func() (kvpb.KVClient, error)
	// JSON selects -o json.
	JSON func() bool
	Addr func() string

	Key   string
	Value []byte
	// ValueArg is VALUE as given ("-" = read stdin).
	ValueArg string
	Ack      uint32
	From     uint32
	Timeout  time.Duration
}

func newOptions(f *cli.Factory) *Options {
	return &Options{
		IO:      f.IO,
		KV:      func() (kvpb.KVClient, error) { return f.KV("") },
		JSON:    f.JSON,
		Addr:    func() string { return f.Addr },
		Timeout: 5 * time.Second,
	}
}

func addQuorumFlags(cmd *cobra.Command, o *Options) {
	cmd.Flags().Uint32Var(&o.Ack, "ack", 0, "replicas that must answer (default from/2+1)")
	cmd.Flags().Uint32Var(&o.From, "from", 0, "replicas to ask (default the replication factor)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the request")
}

// validate checks the quorum flags as far as the client can.
func (o *Options) validate() error {
	if o.Key == "" {
		return cli.UsageErrorf("KEY must not be empty")
	}
	if o.Ack > 0 && o.From > 0 && o.Ack > o.From {
		return cli.UsageErrorf("--ack %d exceeds --from %d", o.Ack, o.From)
	}
	return nil
}

// result is the -o json shape of get, put and del, a stable schema: key, timestamp (the
// write's HLC, a number), time (its wall clock, RFC 3339) and for get value_base64 (the
// value's bytes) and value (the same as text, present only when the bytes are valid UTF-8,
// which JSON strings must be).
type result struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
	Timestamp   uint64  `json:"timestamp"`
	Time        string  `json:"time,omitempty"`
}

// valueResult is get's result for value.
func valueResult(key string, value []byte, ts uint64) result {
	r := result{Key: key, Timestamp: ts, Time: present.Time(ts)}
	b64 := base64.StdEncoding.EncodeToString(value)
	r.ValueBase64 = &b64
	if utf8.Valid(value) {
		v := string(value)
		r.Value = &v
	}
	return r
}

// NewCmdGet returns `kvctl get KEY`. runF replaces the run step in tests.
func NewCmdGet(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Read one key (the newest version among the replicas that answer)",
		Example: `  kvctl get user:1
  kvctl get user:1 --ack 1 --from 1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Key = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return runGet(cmd.Context(), o)
		},
	}
	addQuorumFlags(cmd, o)
	return cmd
}

func runGet(ctx context.Context, o *Options) error {
	c, err := o.KV()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resp, err := c.Get(ctx, &kvpb.GetRequest{Key: []byte(o.Key), Ack: o.Ack, From: o.From})
	if rpcerr.ReasonOf(err) == kvpb.Reason_REASON_NOT_FOUND {
		// An answer, said once: exit 4, not the 1 of a node that cannot be reached.
		return fmt.Errorf("%w: key %q", cli.ErrNotFound, o.Key)
	}
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, valueResult(o.Key, resp.GetValue(), resp.GetTimestamp()))
	}
	if _, err := o.IO.Out.Write(resp.GetValue()); err != nil {
		return err
	}
	if o.IO.OutTTY {
		fmt.Fprintln(o.IO.Out)
	}
	return nil
}

// NewCmdPut returns `kvctl put KEY VALUE` (VALUE "-" reads stdin).
func NewCmdPut(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:   "put KEY VALUE",
		Short: "Write one key; VALUE - reads the value from stdin",
		Example: `  kvctl put user:1 alice
  kvctl put blob:7 - < photo.jpg
  kvctl put user:1 bob --ack 3`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Key, o.ValueArg = args[0], args[1]
			if err := o.validate(); err != nil {
				return err
			}
			if o.ValueArg == "-" {
				b, err := io.ReadAll(o.IO.In)
				if err != nil {
					return fmt.Errorf("read value from stdin: %w", err)
				}
				o.Value = b
			} else {
				o.Value = []byte(o.ValueArg)
			}
			if runF != nil {
				return runF(o)
			}
			return runPut(cmd.Context(), o)
		},
	}
	addQuorumFlags(cmd, o)
	return cmd
}

func runPut(ctx context.Context, o *Options) error {
	c, err := o.KV()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resp, err := c.Put(ctx, &kvpb.PutRequest{Key: []byte(o.Key), Value: o.Value, Ack: o.Ack, From: o.From})
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, result{Key: o.Key, Timestamp: resp.GetTimestamp(), Time: present.Time(resp.GetTimestamp())})
	}
	fmt.Fprintf(o.IO.Out, "stored %s (%d bytes)\n", o.Key, len(o.Value))
	return nil
}

// NewCmdDel returns `kvctl del KEY`.
func NewCmdDel(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := newOptions(f)
	cmd := &cobra.Command{
		Use:     "del KEY",
		Aliases: []string{"delete", "rm"},
		Short:   "Delete one key (writes a tombstone; deleting an absent key succeeds)",
		Example: `  kvctl del user:1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Key = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return runDel(cmd.Context(), o)
		},
	}
	addQuorumFlags(cmd, o)
	return cmd
}

func runDel(ctx context.Context, o *Options) error {
	c, err := o.KV()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resp, err := c.Delete(ctx, &kvpb.DeleteRequest{Key: []byte(o.Key), Ack: o.Ack, From: o.From})
	if err != nil {
		return cli.RPCError(o.Addr(), err)
	}
	if o.JSON() {
		return cli.PrintJSON(o.IO.Out, result{Key: o.Key, Timestamp: resp.GetTimestamp(), Time: present.Time(resp.GetTimestamp())})
	}
	fmt.Fprintf(o.IO.Out, "deleted %s\n", o.Key)
	return nil
}
