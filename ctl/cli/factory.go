package cli

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/node/auth"
	"ringkv/proto/kvpb"
)

// Factory gives commands their streams and their connection to the cluster. The global
// flags (--addr, -o, --secret-file) fill it before a command runs.
type Factory struct {
	IO *IOStreams
	// Addr is any node's gRPC address, or several separated by commas, tried in turn.
	Addr string
	// Output is "table" or "json".
	Output string
	// SecretFile holds the cluster secret; empty when the cluster has none.
	SecretFile string

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// NewFactory returns a Factory on the given streams with kvctl's defaults.
func NewFactory(ios *IOStreams) *Factory {
	addr := os.Getenv("KVCTL_ADDR")
	if addr == "" {
		addr = "127.0.0.1:9090"
	}
	return &Factory{IO: ios, Addr: addr, Output: "table", SecretFile: os.Getenv("KVCTL_SECRET_FILE")}
}

// JSON tells whether -o json was asked for.
func (f *Factory) JSON() bool { return f.Output == "json" }

// Addrs returns the addresses of --addr, in the order they are tried.
func (f *Factory) Addrs() []string { return SplitAddrs(f.Addr) }

// Target returns what grpc.NewClient dials for addr ("" = f.Addr) and the options it needs: a
// list of addresses ("a:1,b:2") is tried in turn, the first that accepts is used.
func Target(addr string) (string, []grpc.DialOption) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if addrs := SplitAddrs(addr); len(addrs) > 1 {
		return listScheme + ":///" + strings.Join(addrs, ","), append(opts, grpc.WithResolvers(listResolver{}))
	}
	return strings.TrimSpace(addr), opts
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
	target, opts := Target(addr)
	if f.SecretFile != "" {
		b, err := os.ReadFile(f.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("read secret file: %w", err)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(auth.Secret(strings.TrimSpace(string(b)))))
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
