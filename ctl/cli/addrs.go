package cli

import (
	"strings"

	"google.golang.org/grpc/resolver"
)

// listScheme names kvctl's resolver of an address list: "kvctl-list:///a:1,b:2".
const listScheme = "kvctl-list"

// SplitAddrs splits --addr's comma-separated list, dropping blanks.
func SplitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// listResolver hands gRPC the addresses of its target, in order; gRPC's default pick_first
// policy connects to the first that accepts, as etcdctl does with --endpoints. Passed to
// each connection with grpc.WithResolvers, never registered globally.
type listResolver struct{}

func (listResolver) Scheme() string { return listScheme }

func (listResolver) Build(t resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	var st resolver.State
	for _, a := range SplitAddrs(t.Endpoint()) {
		st.Addresses = append(st.Addresses, resolver.Address{Addr: a})
	}
	if err := cc.UpdateState(st); err != nil {
		return nil, err
	}
	return listResolver{}, nil
}

func (listResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (listResolver) Close()                                {}
