package peers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// countClient answers CountRanges with n counts per call, recording whether the call asked
// to wait for a ready connection.
type countClient struct {
	kvpb.AdminClient
	n      int
	waited *atomic.Int32
}

func (c countClient) CountRanges(_ context.Context, req *kvpb.CountRangesRequest, opts ...grpc.CallOption) (*kvpb.CountRangesResponse, error) {
	for _, o := range opts {
		if f, ok := o.(grpc.FailFastCallOption); ok && !f.FailFast {
			c.waited.Add(1)
		}
	}
	out := &kvpb.CountRangesResponse{}
	for range c.n {
		out.Counts = append(out.Counts, &kvpb.RangeCount{Keys: 7, Bytes: 70})
	}
	return out, nil
}

type countDialer map[string]kvpb.AdminClient

func (d countDialer) Admin(addr string) (kvpb.AdminClient, error) {
	if c, ok := d[addr]; ok {
		return c, nil
	}
	return nil, errors.New("no route")
}

// TestCountRanges: this node answers through local; the others over Admin, waiting for a
// connection that is not ready; a member with the wrong number of counts, or none, fails.
func TestCountRanges(t *testing.T) {
	var waited atomic.Int32
	two := []*kvpb.TokenRange{{Start: 1, End: 2}, {Start: 2, End: 3}}
	p := Peers{Self: "n1", Dial: countDialer{
		"a2": countClient{n: 2, waited: &waited},
		"a3": countClient{n: 1, waited: &waited},
	}}
	asks := []Count{
		{Member: ring.Member{ID: "n1", Addr: "a1"}, Ranges: two},
		{Member: ring.Member{ID: "n2", Addr: "a2"}, Ranges: two},
		{Member: ring.Member{ID: "n3", Addr: "a3"}, Ranges: two},
		{Member: ring.Member{ID: "n4", Addr: "a4"}, Ranges: two},
	}
	local := func(rs []*kvpb.TokenRange) ([]*kvpb.RangeCount, error) {
		out := make([]*kvpb.RangeCount, len(rs))
		for i := range rs {
			out[i] = &kvpb.RangeCount{Keys: 1}
		}
		return out, nil
	}
	counts, errs := CountRanges(context.Background(), p, asks, local)
	if errs[0] != nil || len(counts[0]) != 2 || counts[0][0].GetKeys() != 1 {
		t.Errorf("self: got %v, %v; want 2 local counts of 1 key", counts[0], errs[0])
	}
	if errs[1] != nil || len(counts[1]) != 2 || counts[1][1].GetKeys() != 7 {
		t.Errorf("n2: got %v, %v; want 2 counts of 7 keys", counts[1], errs[1])
	}
	if errs[2] == nil {
		t.Errorf("n3 answered 1 count for 2 ranges: got no error")
	}
	if errs[3] == nil {
		t.Errorf("n4 cannot be dialed: got no error")
	}
	if got := waited.Load(); got != 2 {
		t.Errorf("%d of 2 calls waited for a ready connection", got)
	}
}
