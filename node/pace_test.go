package node_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/internal/eventually"
	"ringkv/node"
	"ringkv/proto/kvpb"
)

// TestRingChangeReportsPace: with the default flags the streams of a ring change are paced by
// latency, and the change's status says, per node streaming, the pace and why — the
// receiver's pulls and the sources' streams, at the operator's rate (the ceiling) here; with
// the pace off none is reported.
//
// Skipped under -short (two 3-node clusters, 3000 keys each, a change at 1 KiB/s: 14 s quiet,
// 42-68 s at a load average of 20-60): the pacing itself is covered by node/stream's and
// node/server's pace cases and its report by ctl/present's; ./test.sh runs this one whole.
func TestRingChangeReportsPace(t *testing.T) {
	if testing.Short() {
		t.Skip("a ring change's pace report from two clusters: runs without -short (./test.sh, .ci/run)")
	}
	for _, tc := range []struct {
		name   string
		target time.Duration
		want   bool
	}{{"default", 0, true}, {"off", node.MovePaceOff, false}} {
		t.Run(tc.name, func(t *testing.T) {
			// One vnode per node: n4 takes a quarter of the keys in a few moves of more than
			// one chunk (a source paces between its chunks).
			c := startChangeCluster(t, 3, func(cfg *node.Config) { cfg.MoveLatencyTarget, cfg.VNodes = tc.target, 1 })
			loadKeys(t, c, "k", 3000)
			n4, err := c.StartEmpty("n4")
			if err != nil {
				t.Fatalf("start n4: %v", err)
			}
			admin := kvpb.NewAdminClient(dialNode(t, c.Config(0).GRPCAddr))
			const limit = 1 << 10 // bytes per second: the move takes a while
			startChange(t, admin, &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4", GrpcAddr: c.Config(n4).GRPCAddr, RateBytes: limit})
			defer func() {
				// A change that ended on its own (a busy machine held the check past the
				// move's end) has nothing to abort.
				if _, err := admin.AbortChange(t.Context(), &kvpb.AbortChangeRequest{}); err != nil && status.Code(err) != codes.NotFound {
					t.Errorf("abort: %v", err)
				}
			}()
			var seen string
			check := func() error {
				p, err := admin.ChangeStatus(t.Context(), &kvpb.ChangeStatusRequest{})
				if err != nil {
					return err
				}
				if p.GetBytesDone() == 0 {
					return fmt.Errorf("nothing streamed yet")
				}
				var recv, send bool
				for _, pc := range p.GetPaces() {
					if pc.GetRateBytes() != limit || pc.GetReason() != kvpb.PaceReason_PACE_REASON_AT_CEILING {
						return fmt.Errorf("got pace %v, want %d B/s at the ceiling", pc, limit)
					}
					recv = recv || pc.GetNodeId() == "n4" && !pc.GetSending()
					send = send || pc.GetNodeId() != "n4" && pc.GetSending()
				}
				seen = fmt.Sprint(p.GetPaces())
				if !recv || !send {
					return fmt.Errorf("got paces %v, want n4's pulls and a source's streams", p.GetPaces())
				}
				return nil
			}
			if tc.want {
				eventually.Succeeds(t, 20*time.Second, check)
				return
			}
			eventually.Succeeds(t, 20*time.Second, func() error {
				if err := check(); err == nil || seen != "[]" {
					return fmt.Errorf("got paces %s, want none with the pace off (%v)", seen, err)
				}
				return nil
			})
		})
	}
}
