package node_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"ringkv/internal/testclock"
	"ringkv/node"
	"ringkv/proto/kvpb"
)

// TestOnCallViewRecordsEveryClientOp: the coordinator feeds every client operation, from
// HTTP and gRPC, to the node's hot keys and heat; the Admin API returns them; Prometheus gets
// the per-node hottest key's share and no per-key label.
func TestOnCallViewRecordsEveryClientOp(t *testing.T) {
	clk := testclock.New(time.Now().Truncate(time.Minute))
	c := startCluster(t, 3, func(cfg *node.Config) { cfg.Now = clk.Now })
	kv := kvpb.NewKVClient(dialNode(t, c.Config(0).GRPCAddr))
	ctx := context.Background()
	for i := range 40 {
		key := "cold-" + fmt.Sprint(i)
		if i%2 == 0 {
			key = "hot"
		}
		if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte("12345")}); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	expect(t, do(t, c, 0, "GET", "/v0/entity?id=hot", nil), 200, "12345")
	expect(t, do(t, c, 0, "GET", "/v0/entity?id=", nil), 400, "") // invalid: not counted
	clk.Advance(10 * time.Second)

	admin := kvpb.NewAdminClient(dialNode(t, c.Config(0).GRPCAddr))
	hk, err := admin.HotKeys(ctx, &kvpb.HotKeysRequest{WindowSeconds: 10, Limit: 3})
	if err != nil {
		t.Fatalf("HotKeys: %v", err)
	}
	if hk.GetOps() != 41 || hk.GetReads() != 1 || hk.GetWrites() != 40 || hk.GetBytes() != 205 {
		t.Errorf("got ops %d reads %d writes %d bytes %d, want 41, 1, 40, 205", hk.GetOps(), hk.GetReads(), hk.GetWrites(), hk.GetBytes())
	}
	if len(hk.GetKeys()) == 0 || string(hk.GetKeys()[0].GetKey()) != "hot" || hk.GetKeys()[0].GetCount() != 21 {
		t.Errorf("got keys %v, want hot first with 21 ops", hk.GetKeys())
	}
	var vops uint64
	for _, v := range hk.GetVnodes() {
		vops += v.GetOps()
	}
	if vops != 41 || len(hk.GetVnodes()) < 2 {
		t.Errorf("got %d ops over %d vnodes, want 41 over several", vops, len(hk.GetVnodes()))
	}
	if _, err := admin.HotKeys(ctx, &kvpb.HotKeysRequest{WindowSeconds: 15}); err == nil {
		t.Errorf("window 15s: got no error, want one")
	}

	h, err := admin.Heat(ctx, &kvpb.HeatRequest{SinceUnixNanos: clk.Now().Add(-time.Minute).UnixNano(), StepSeconds: 10, Metric: kvpb.HeatMetric_HEAT_METRIC_WRITES})
	if err != nil {
		t.Fatalf("Heat: %v", err)
	}
	var writes uint64
	for _, v := range h.GetValues() {
		writes += v
	}
	if writes != 40 || h.GetBuckets() != 256 || len(h.GetValues()) != 256*len(h.GetColumnsUnixNanos()) {
		t.Errorf("got %d writes in %d values over %d columns, want 40 in 256 per column", writes, len(h.GetValues()), len(h.GetColumnsUnixNanos()))
	}
	if len(h.GetEvents()) == 0 || h.GetEvents()[0].GetKind() != "node-start" {
		t.Errorf("got events %v, want the node's start first", h.GetEvents())
	}

	m := doURL(t, "http://"+c.Node(0).Addrs().Admin+"/metrics", "GET", nil)
	if !regexp.MustCompile(`(?m)^ringkv_hottest_key_share 0\.51`).MatchString(m.body) {
		t.Errorf("metrics: want ringkv_hottest_key_share 0.51..., got %q", grepLines(m.body, "hottest"))
	}
	if strings.Contains(m.body, `"hot"`) || strings.Contains(m.body, "cold-") {
		t.Errorf("metrics carry a key as a label")
	}
}

func grepLines(s, sub string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}
