// Package cert is `kvctl cert`: the CA, node and client certificates of a cluster's mutual
// TLS, written into --certs-dir (the CockroachDB convention: ca.crt/ca.key,
// node.crt/node.key, client.crt/client.key).
package cert

import (
	"fmt"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/node/certs"
)

// Options are the flags of the cert commands.
type Options struct {
	IO *cli.IOStreams
	// CertsDir is the global --certs-dir (env KVCTL_CERTS_DIR).
	CertsDir func() string
	// Kind is "ca", "node" or "client".
	Kind      string
	Hosts     []string
	User      string
	Overwrite bool
}

// NewCmdCert returns `kvctl cert` with create-ca, create-node and create-client. runF
// replaces the run step in tests.
func NewCmdCert(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Create the CA, node and client certificates of mutual TLS",
		Long: `cert writes the certificates of a cluster's mutual TLS into --certs-dir:

  ca.crt, ca.key          the cluster's CA: it signs the other two; keep ca.key off the nodes
  node.crt, node.key      what every node serves with and presents to its peers; its SANs are
                          the hosts the nodes are reached at (names, wildcards, IPs)
  client.crt, client.key  what kvctl presents (kvctl --certs-dir DIR)

A node started with kvnode --certs-dir DIR (ca.crt, node.crt, node.key) refuses plaintext.
Existing certificates and keys are never replaced without --overwrite.`,
		Example: `  kvctl cert create-ca --certs-dir certs
  kvctl cert create-node n1 n2 n3 localhost 127.0.0.1 --certs-dir certs
  kvctl cert create-node '*.ringkv.default.svc.cluster.local' --certs-dir certs
  kvctl cert create-client --certs-dir certs
  kvctl --certs-dir certs --addr 127.0.0.1:19091 status`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newCmd(f, runF, "ca", "create-ca", "Create the CA (ca.crt, ca.key)", cobra.NoArgs),
		newCmd(f, runF, "node", "create-node HOST [HOST...]", "Create node.crt and node.key, valid for the HOSTs, signed by the CA", cobra.MinimumNArgs(1)),
		newCmd(f, runF, "client", "create-client", "Create client.crt and client.key for kvctl, signed by the CA", cobra.NoArgs),
	)
	return cmd
}

func newCmd(f *cli.Factory, runF func(*Options) error, kind, use, short string, args cobra.PositionalArgs) *cobra.Command {
	o := &Options{IO: f.IO, CertsDir: func() string { return f.CertsDir }, Kind: kind, User: "root"}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return cli.UsageErrorf("%s", err)
			}
			return nil
		},
		RunE: func(_ *cobra.Command, a []string) error {
			o.Hosts = a
			if o.CertsDir() == "" {
				return cli.UsageErrorf("--certs-dir is required")
			}
			if runF != nil {
				return runF(o)
			}
			return Run(o)
		},
	}
	cmd.Flags().BoolVar(&o.Overwrite, "overwrite", false, "replace existing certificates and keys")
	if kind == "client" {
		cmd.Flags().StringVar(&o.User, "user", o.User, "common name of the client certificate")
	}
	return cmd
}

// Run writes the files and prints their paths.
func Run(o *Options) error {
	co := certs.Options{Overwrite: o.Overwrite}
	var (
		paths []string
		err   error
	)
	switch o.Kind {
	case "ca":
		paths, err = certs.CreateCA(o.CertsDir(), co)
	case "node":
		paths, err = certs.CreateNode(o.CertsDir(), o.Hosts, co)
	case "client":
		paths, err = certs.CreateClient(o.CertsDir(), o.User, co)
	}
	if err != nil {
		return err
	}
	for _, p := range paths {
		fmt.Fprintln(o.IO.Out, "wrote", p)
	}
	return nil
}
