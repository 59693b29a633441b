package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/internal/eventually"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// TestFutureTimestampRefused: a Replica.Write stamped a year ahead is refused with
// FailedPrecondition (reason CLOCK_OFFSET) and counted; the replica's clock does not jump,
// and a later acknowledged PUT of the key is what every read returns.
func TestFutureTimestampRefused(t *testing.T) {
	c := startCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc := kvpb.NewReplicaClient(dialNode(t, c.Config(1).GRPCAddr))
	future := uint64(time.Now().Add(365*24*time.Hour).UnixMilli()) << 16
	epoch := c.Node(1).View().Current.Epoch()
	_, err := rc.Write(ctx, &kvpb.WriteRequest{Key: []byte("k"), Record: &kvpb.Record{Timestamp: future, Value: []byte("from the future")}, Epoch: epoch})
	if status.Code(err) != codes.FailedPrecondition || rpcerr.ReasonOf(err) != kvpb.Reason_REASON_CLOCK_OFFSET {
		t.Fatalf("Replica.Write a year ahead: got %v (reason %v), want FailedPrecondition %s", err, rpcerr.ReasonOf(err), kvpb.Reason_REASON_CLOCK_OFFSET)
	}
	if !strings.Contains(err.Error(), "ahead of this node's clock") {
		t.Errorf("got %q, want it to say the timestamp is ahead of the node's clock", err)
	}
	// The clock did not adopt it: a read answers with a wall clock near now.
	rr, err := rc.Read(ctx, &kvpb.ReadRequest{Key: []byte("k"), Epoch: epoch})
	if err != nil {
		t.Fatalf("Replica.Read: %v", err)
	}
	if rr.GetFound() {
		t.Fatalf("the refused record was stored: %v", rr.GetRecord())
	}
	expect(t, do(t, c, 0, "PUT", "/v0/entity?id=k&ack=3", []byte("now")), 201, "")
	for i := range 3 {
		expect(t, do(t, c, i, "GET", "/v0/entity?id=k&ack=3", nil), 200, "now")
	}
	metrics := doURL(t, "http://"+c.Node(1).Addrs().Admin+"/metrics", "GET", nil)
	if want := "ringkv_clock_offset_rejected_total 1\n"; !strings.Contains(metrics.body, want) {
		t.Errorf("metrics lack %q", strings.TrimSpace(want))
	}
	// Offsets to peers are measured on the replica calls the PUT made.
	if !strings.Contains(metrics.body, fmt.Sprintf("ringkv_clock_offset_seconds{peer=%q}", "n1")) {
		t.Errorf("node n2's metrics lack its clock offset to n1")
	}
}

// TestReadyzReportsQuorumLoss: a node whose peers are gone still answers /v0/status 200 (the
// course's API), but /readyz and NodeInfo say it cannot reach a quorum; once a peer is back,
// it is healthy again without a client request.
func TestReadyzReportsQuorumLoss(t *testing.T) {
	c := startCluster(t, 3, nil)
	readyz := func() response {
		return doURL(t, "http://"+c.Node(0).Addrs().Admin+"/readyz", "GET", nil)
	}
	expect(t, readyz(), 200, "ready\n")
	for _, i := range []int{1, 2} {
		if err := c.Stop(i); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	expect(t, do(t, c, 0, "GET", "/v0/status", nil), 200, "")
	eventually.Succeeds(t, 10*time.Second, func() error {
		got := readyz()
		if got.code != 503 || !strings.Contains(got.body, "no quorum of replicas reachable for") || !strings.Contains(got.body, "n2, n3") {
			return fmt.Errorf("/readyz: got %d %q, want 503 naming the lost quorum and n2, n3", got.code, got.body)
		}
		return nil
	})
	info, err := kvpb.NewAdminClient(dialNode(t, c.Config(0).GRPCAddr)).NodeInfo(context.Background(), &kvpb.NodeInfoRequest{})
	if err != nil || len(info.GetProblems()) != 1 {
		t.Fatalf("NodeInfo: problems %q (err %v), want the lost quorum", info.GetProblems(), err)
	}
	if err := c.Restart(1); err != nil {
		t.Fatalf("restart: %v", err)
	}
	eventually.Succeeds(t, 10*time.Second, func() error {
		if got := readyz(); got.code != 200 {
			return fmt.Errorf("/readyz with n2 back: got %d %q, want 200", got.code, got.body)
		}
		return nil
	})
}
