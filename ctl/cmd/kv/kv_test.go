package kv

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/node"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		name      string
		cmd       func(*cli.Factory, func(*Options) error) *cobra.Command
		args      []string
		stdin     string
		wantKey   string
		wantValue string
		wantAck   uint32
		wantFrom  uint32
		wantUsage bool
	}{
		{name: "get", cmd: NewCmdGet, args: []string{"k"}, wantKey: "k"},
		{name: "get quorum", cmd: NewCmdGet, args: []string{"k", "--ack", "1", "--from", "2"}, wantKey: "k", wantAck: 1, wantFrom: 2},
		{name: "get ack over from", cmd: NewCmdGet, args: []string{"k", "--ack", "3", "--from", "2"}, wantUsage: true},
		{name: "get no key", cmd: NewCmdGet, args: []string{}, wantUsage: true},
		{name: "get empty key", cmd: NewCmdGet, args: []string{""}, wantUsage: true},
		{name: "get bad ack", cmd: NewCmdGet, args: []string{"k", "--ack", "-1"}, wantUsage: true},
		{name: "put", cmd: NewCmdPut, args: []string{"k", "v"}, wantKey: "k", wantValue: "v"},
		{name: "put stdin", cmd: NewCmdPut, args: []string{"k", "-", "--ack", "2"}, stdin: "from\nstdin", wantKey: "k", wantValue: "from\nstdin", wantAck: 2},
		{name: "put empty value", cmd: NewCmdPut, args: []string{"k", ""}, wantKey: "k", wantValue: ""},
		{name: "put no value", cmd: NewCmdPut, args: []string{"k"}, wantUsage: true},
		{name: "del", cmd: NewCmdDel, args: []string{"k", "--from", "1"}, wantKey: "k", wantFrom: 1},
		{name: "del two keys", cmd: NewCmdDel, args: []string{"a", "b"}, wantUsage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, in, _, _ := cli.Test()
			in.WriteString(tt.stdin)
			f := cli.NewFactory(ios)
			var got *Options
			cmd := tt.cmd(f, func(o *Options) error { got = o; return nil })
			err := cli.ExecuteTest(cmd, ios, tt.args...)
			if tt.wantUsage {
				if err == nil {
					t.Fatalf("got no error, want a usage error")
				}
				if code := cli.ExitCode(err); code != cli.ExitUsage && !strings.Contains(err.Error(), "arg") {
					t.Errorf("got exit %d (%v), want %d", code, err, cli.ExitUsage)
				}
				return
			}
			if err != nil {
				t.Fatalf("execute: %v", err)
			}
			if got.Key != tt.wantKey || string(got.Value) != tt.wantValue || got.Ack != tt.wantAck || got.From != tt.wantFrom {
				t.Errorf("got key=%q value=%q ack=%d from=%d, want key=%q value=%q ack=%d from=%d",
					got.Key, got.Value, got.Ack, got.From, tt.wantKey, tt.wantValue, tt.wantAck, tt.wantFrom)
			}
		})
	}
}

func TestAgainstNode(t *testing.T) {
	base := node.DefaultConfig()
	base.Replicas, base.VNodes = 1, 8
	c, err := node.StartLocalCluster(context.Background(), 1, base, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	defer c.Close()
	ios, _, out, _ := cli.Test()
	f := cli.NewFactory(ios)
	defer f.Close()
	f.Addr = c.Node(0).Addrs().GRPC
	ctx := context.Background()
	run := func(runF func(context.Context, *Options) error, o *Options) error {
		o.IO, o.JSON, o.Addr = ios, f.JSON, func() string { return f.Addr }
		o.KV = newOptions(f).KV
		o.Timeout = newOptions(f).Timeout
		return runF(ctx, o)
	}
	if err := run(runPut, &Options{Key: "k", Value: []byte("hello")}); err != nil {
		t.Fatalf("put: %v", err)
	}
	out.Reset()
	if err := run(runGet, &Options{Key: "k"}); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got := out.String(); got != "hello" {
		t.Errorf("get printed %q, want %q", got, "hello")
	}
	if err := run(runDel, &Options{Key: "k"}); err != nil {
		t.Fatalf("del: %v", err)
	}
	err = run(runGet, &Options{Key: "k"})
	if err == nil || !strings.Contains(err.Error(), "not found") || errors.Is(err, cli.ErrUsage) {
		t.Errorf("get after del: got %v, want a not found failure", err)
	}
	if err := run(runGet, &Options{Key: "k", From: 2}); err == nil || !strings.Contains(err.Error(), "invalid argument") {
		t.Errorf("get --from 2 of 1: got %v, want invalid argument", err)
	}
}

// TestValueJSON: get -o json carries the value's bytes in value_base64, and as text in value
// only when they are valid UTF-8 (encoding/json would replace the others with U+FFFD).
func TestValueJSON(t *testing.T) {
	tests := []struct {
		value     []byte
		wantValue any // nil = absent
		wantB64   string
	}{
		{[]byte("héllo"), "héllo", "aMOpbGxv"},
		{[]byte{0xff, 0x00, 'a'}, nil, "/wBh"},
		{[]byte{}, "", ""},
	}
	for _, tt := range tests {
		ios, _, out, _ := cli.Test()
		if err := cli.PrintJSON(ios.Out, valueResult("k", tt.value, 1)); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got["value"] != tt.wantValue || got["value_base64"] != tt.wantB64 {
			t.Errorf("value %q: got value %#v value_base64 %#v, want %#v %q", tt.value, got["value"], got["value_base64"], tt.wantValue, tt.wantB64)
		}
		if b, _ := base64.StdEncoding.DecodeString(got["value_base64"].(string)); !bytes.Equal(b, tt.value) {
			t.Errorf("value %q: got %q back from value_base64", tt.value, b)
		}
	}
}
