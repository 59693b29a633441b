package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"ringkv/node/auth"
	"ringkv/node/certs"
	"ringkv/proto/kvpb"
)

// Factory gives commands their streams and their connection to the cluster. The global
// flags (--addr, -o, --secret-file, --certs-dir) fill it before a command runs.
type Factory struct {
	IO *IOStreams
	// Addr is any node's gRPC address, or several separated by commas, tried in turn.
	Addr string
	// Output is "table" or "json".
	Output string
	// SecretFile holds the cluster secret; empty when the cluster has none.
	SecretFile string
	// CertsDir holds ca.crt, client.crt and client.key: connect with mutual TLS. Empty:
	// plaintext.
	CertsDir string

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// NewFactory returns a Factory on the given streams with kvctl's defaults.
func NewFactory(ios *IOStreams) *Factory {
	addr := os.Getenv("KVCTL_ADDR")
	if addr == "" {
		addr = "127.0.0.1:9090"
	}
	return &Factory{IO: ios, Addr: addr, Output: "table", SecretFile: os.Getenv("KVCTL_SECRET_FILE"), CertsDir: os.Getenv("KVCTL_CERTS_DIR")}
}

// JSON tells whether -o json was asked for.
func (f *Factory) JSON() bool { return f.Output == "json" }

// Addrs returns the addresses of --addr, in the order they are tried.
func (f *Factory) Addrs() []string { return SplitAddrs(f.Addr) }

// Target returns what grpc.NewClient dials for addr ("" = f.Addr) and the options it needs: a
// list of addresses ("a:1,b:2") is tried in turn, the first that accepts is used.
func Target(addr string) (string, []grpc.DialOption) {
	if addrs := SplitAddrs(addr); len(addrs) > 1 {
		return listScheme + ":///" + strings.Join(addrs, ","), []grpc.DialOption{grpc.WithResolvers(listResolver{})}
	}
	return strings.TrimSpace(addr), nil
}

// Dial returns the gRPC target for addr (see Target) and every option kvctl dials with:
// TLS from --certs-dir and the cluster secret (DialOptions), and the list resolver.
func (f *Factory) Dial(addr string) (string, []grpc.DialOption, error) {
	opts, err := f.DialOptions()
	if err != nil {
		return "", nil, err
	}
	target, ropts := Target(addr)
	return target, append(opts, ropts...), nil
}

// Conn returns a shared client connection to addr ("" = f.Addr; a comma-separated list is
// tried in turn). Connections are closed by Close.
func (f *Factory) Conn(addr string) (*grpc.ClientConn, error) {
	if addr == "" {
		addr = f.Addr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	target, opts, err := f.Dial(addr)
	if err != nil {
		return nil, err
	}
	c, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if f.conns == nil {
		f.conns = map[string]*grpc.ClientConn{}
	}
	f.conns[addr] = c
	return c, nil
}

// DialOptions are the options of every connection kvctl opens to a node: mutual TLS with
// --certs-dir (else plaintext, with a hint when the node turns out to speak TLS), and the
// cluster secret of --secret-file on every call.
func (f *Factory) DialOptions() ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	if f.CertsDir != "" {
		cfg, err := certs.Client(f.CertsDir, certs.ClientCert, certs.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("--certs-dir: %w", err)
		}
		creds = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if f.CertsDir == "" {
		opts = append(opts, grpc.WithChainUnaryInterceptor(tlsHintUnary), grpc.WithChainStreamInterceptor(tlsHintStream))
	}
	if f.SecretFile != "" {
		b, err := os.ReadFile(f.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("read secret file: %w", err)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(auth.Secret(strings.TrimSpace(string(b)))))
	}
	return opts, nil
}

// HTTPTLS is the TLS config of kvctl's HTTP(S) requests to a node (the client HTTP API, the
// admin listener): with --certs-dir, servers checked against ca.crt and client.crt presented;
// nil without --certs-dir (plain HTTP).
func (f *Factory) HTTPTLS() (*tls.Config, error) {
	if f.CertsDir == "" {
		return nil, nil
	}
	cfg, err := certs.Client(f.CertsDir, certs.ClientCert, certs.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("--certs-dir: %w", err)
	}
	return cfg, nil
}

// HTTPScheme is the scheme of kvctl's HTTP requests to a node: https with --certs-dir.
func (f *Factory) HTTPScheme() string {
	if f.CertsDir != "" {
		return "https"
	}
	return "http"
}

// KV returns a client of the KV service at addr ("" = f.Addr).
func (f *Factory) KV(addr string) (kvpb.KVClient, error) {
	c, err := f.Conn(addr)
	if err != nil {
		return nil, err
	}
	return kvpb.NewKVClient(c), nil
}

// Admin returns a client of the Admin service at addr ("" = f.Addr).
func (f *Factory) Admin(addr string) (kvpb.AdminClient, error) {
	c, err := f.Conn(addr)
	if err != nil {
		return nil, err
	}
	return kvpb.NewAdminClient(c), nil
}

// Close closes every connection the factory opened.
func (f *Factory) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// tlsHint says why a plaintext connection failed when the node speaks TLS: without it the
// operator reads only "error reading server preface".
func tlsHint(err error) error {
	s, ok := status.FromError(err)
	if !ok || s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "server preface") {
		return err
	}
	return status.Error(s.Code(), s.Message()+" (does the node use TLS? pass --certs-dir)")
}

func tlsHintUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return tlsHint(invoker(ctx, method, req, reply, cc, opts...))
}

func tlsHintStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	return s, tlsHint(err)
}
