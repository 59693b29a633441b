// Package peers asks the Admin service of a ring's members in parallel, this node answering
// for itself in place of a call: the fan-out behind Admin.Status, Admin.Ring and the planning
// and progress of ring changes (node/change).
package peers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// Dialer returns an Admin client of another member by its gRPC address. The node owns the
// connections (with the cluster secret attached). Safe for concurrent use.
type Dialer interface {
	Admin(addr string) (kvpb.AdminClient, error)
}

// DefaultTimeout bounds each peer call when Peers.Timeout is 0.
const DefaultTimeout = 2 * time.Second

// Peers reaches the other members. Its zero Timeout means DefaultTimeout. Safe for
// concurrent use.
type Peers struct {
	// Self is this node's id: Ask answers for it through local.
	Self string
	// Dial reaches the others.
	Dial Dialer
	// Timeout bounds each call.
	Timeout time.Duration
}

// CallTimeout is the bound of one peer call.
func (p Peers) CallTimeout() time.Duration {
	if p.Timeout <= 0 {
		return DefaultTimeout
	}
	return p.Timeout
}

// Ask calls ask on every member's Admin service in parallel, each call bounded by
// p.CallTimeout; this node answers through local instead when local's ok is true. errs[i]
// is set for the members that failed.
func Ask[T any](ctx context.Context, p Peers, ms []ring.Member, local func() (T, bool),
	ask func(ctx context.Context, c kvpb.AdminClient) (T, error)) ([]T, []error) {
	out := make([]T, len(ms))
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		if m.ID == p.Self {
			if v, ok := local(); ok {
				out[i] = v
				continue
			}
		}
		wg.Go(func() {
			c, err := p.Dial.Admin(m.Addr)
			if err != nil {
				errs[i] = err
				return
			}
			cctx, cancel := context.WithTimeout(ctx, p.CallTimeout())
			defer cancel()
			out[i], errs[i] = ask(cctx, c)
		})
	}
	wg.Wait()
	return out, errs
}

// Infos asks every member for its NodeInfo in parallel, this node answering through self;
// errs[i] is set for those that failed.
func Infos(ctx context.Context, p Peers, ms []ring.Member, self func(ctx context.Context) *kvpb.NodeInfoResponse) ([]*kvpb.NodeInfoResponse, []error) {
	return Ask(ctx, p, ms,
		func() (*kvpb.NodeInfoResponse, bool) { return self(ctx), true },
		func(ctx context.Context, c kvpb.AdminClient) (*kvpb.NodeInfoResponse, error) {
			return c.NodeInfo(ctx, &kvpb.NodeInfoRequest{})
		})
}

// Members returns the members of v's current ring plus those only in its next one, and
// the current ring (nil, nil while the node has no ring).
func Members(v *ring.View) (*ring.Ring, []ring.Member) {
	if v == nil || v.Current == nil {
		return nil, nil
	}
	ms := v.Current.Members()
	if v.Next != nil {
		seen := map[string]bool{}
		for _, m := range ms {
			seen[m.ID] = true
		}
		for _, m := range v.Next.Members() {
			if !seen[m.ID] {
				ms = append(ms, m)
			}
		}
	}
	return v.Current, ms
}

// ErrorLine is the gRPC message of a peer's error (or its text), for the error fields of
// Status, Ring and change plans.
func ErrorLine(err error) string {
	if s, ok := status.FromError(err); ok {
		return fmt.Sprintf("%s: %s", s.Code(), s.Message())
	}
	return err.Error()
}
