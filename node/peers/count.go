package peers

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"

	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// Count is what to ask one member to count: its records in each of Ranges.
type Count struct {
	Member ring.Member
	Ranges []*kvpb.TokenRange
}

// CountRanges asks each member of asks, in parallel, for the records it holds in its ranges
// (Admin.CountRanges: keys and bytes, a walk of keys only), for the estimates of repair plans
// and ring-change plans. This node answers through local when it is asked and local is not
// nil. Each call is bounded by p.CallTimeout and waits for a connection that is not ready
// (WaitForReady): a member whose connection is in its reconnect backoff (at most 2 s, see
// node/conns.go), just restarted, is counted rather than taken for a member that is down.
// counts[i] holds one count per range of asks[i]; errs[i] is set for the members that failed.
func CountRanges(ctx context.Context, p Peers, asks []Count, local func(ranges []*kvpb.TokenRange) ([]*kvpb.RangeCount, error)) (counts [][]*kvpb.RangeCount, errs []error) {
	counts = make([][]*kvpb.RangeCount, len(asks))
	errs = make([]error, len(asks))
	var wg sync.WaitGroup
	for i, a := range asks {
		wg.Go(func() {
			var got []*kvpb.RangeCount
			var err error
			if a.Member.ID == p.Self && local != nil {
				got, err = local(a.Ranges)
			} else {
				got, err = countOn(ctx, p, a)
			}
			if err == nil && len(got) != len(a.Ranges) {
				err = fmt.Errorf("count ranges: got %d counts for %d ranges", len(got), len(a.Ranges))
			}
			counts[i], errs[i] = got, err
		})
	}
	wg.Wait()
	return counts, errs
}

func countOn(ctx context.Context, p Peers, a Count) ([]*kvpb.RangeCount, error) {
	c, err := p.Dial.Admin(a.Member.Addr)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, p.CallTimeout())
	defer cancel()
	resp, err := c.CountRanges(cctx, &kvpb.CountRangesRequest{Ranges: a.Ranges}, grpc.WaitForReady(true))
	return resp.GetCounts(), err
}
