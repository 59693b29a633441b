package node_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/internal/eventually"
	"ringkv/node"
	"ringkv/node/hlc"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

// startRepairCluster starts 3 founders, N=3, background repair off (tests start sessions).
func startRepairCluster(t *testing.T, adjust func(*node.Config)) *node.LocalCluster {
	t.Helper()
	return startChangeCluster(t, 3, func(cfg *node.Config) {
		cfg.RepairInterval = 0
		if adjust != nil {
			adjust(cfg)
		}
	})
}

func apply(t *testing.T, st *store.Store, key string, rec store.Record) {
	t.Helper()
	if _, err := st.Apply(ring.Token([]byte(key)), []byte(key), rec); err != nil {
		t.Fatal(err)
	}
}

// dump is every record a store holds, by key.
func dump(t *testing.T, st *store.Store) map[string]store.Record {
	t.Helper()
	out := map[string]store.Record{}
	if err := st.Scan(context.Background(), 0, 0, nil, func(_, key []byte, rec store.Record) error {
		out[string(key)] = rec
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// runRepair starts a repair on node i and waits for it to end; it returns the final progress.
func runRepair(t *testing.T, c *node.LocalCluster, i int, req *kvpb.RepairRequest) *kvpb.RepairProgress {
	t.Helper()
	admin := kvpb.NewAdminClient(dialNode(t, c.Config(i).GRPCAddr))
	plan, err := admin.StartRepair(context.Background(), req)
	if err != nil {
		t.Fatalf("start repair: %v", err)
	}
	var p *kvpb.RepairProgress
	eventually.Succeeds(t, 3*time.Minute, func() error {
		p, err = admin.RepairStatus(context.Background(), &kvpb.RepairStatusRequest{})
		if err != nil {
			return err
		}
		if p.GetId() != plan.GetId() || p.GetState() == kvpb.RepairState_REPAIR_STATE_RUNNING {
			return fmt.Errorf("repair %d: %s, %d of %d ranges", plan.GetId(), p.GetState(), p.GetRangesDone(), p.GetRangesTotal())
		}
		return nil
	})
	return p
}

// TestRepairConvergesReplicas: replicas that differ (missing keys, older versions, a
// tombstone one replica missed, a key only one holds) hold the same records after one repair,
// and only what differs streams; a dry run streams nothing.
func TestRepairConvergesReplicas(t *testing.T) {
	c := startRepairCluster(t, nil)
	sts := []*store.Store{c.Node(0).Store(), c.Node(1).Store(), c.Node(2).Store()}
	differ := 0
	ts := hlc.Since(time.Now()) // recent: no tombstone is past the grace
	for i := range 1000 {
		k := fmt.Sprintf("key-%04d", i)
		v := store.Record{TS: ts, Value: fmt.Appendf(nil, "value-%d", i)}
		switch {
		case i < 10: // n3 missed it
			apply(t, sts[0], k, v)
			apply(t, sts[1], k, v)
			differ++
		case i < 15: // n1 holds an older version
			apply(t, sts[0], k, store.Record{TS: ts - 100, Value: []byte("old")})
			apply(t, sts[1], k, v)
			apply(t, sts[2], k, v)
			differ++
		case i < 18: // n2 holds the delete the others missed
			apply(t, sts[0], k, v)
			apply(t, sts[1], k, store.Record{TS: ts + 100, Tombstone: true})
			apply(t, sts[2], k, v)
			differ++
		case i < 20: // only n3 holds it
			apply(t, sts[2], k, v)
			differ++
		default:
			for _, st := range sts {
				apply(t, st, k, v)
			}
		}
	}
	before := []map[string]store.Record{dump(t, sts[0]), dump(t, sts[1]), dump(t, sts[2])}

	dry := runRepair(t, c, 0, &kvpb.RepairRequest{DryRun: true})
	if dry.GetState() != kvpb.RepairState_REPAIR_STATE_DONE || dry.GetKeysStreamed() != 0 {
		t.Fatalf("dry run: %s, %d keys streamed; want done, 0 (err %q)", dry.GetState(), dry.GetKeysStreamed(), dry.GetError())
	}
	var mismatched uint64
	for _, p := range dry.GetPairs() {
		mismatched += p.GetLeavesMismatched()
	}
	if mismatched == 0 {
		t.Errorf("dry run found no mismatched leaves; want some")
	}
	for i, st := range sts {
		if got := dump(t, st); len(got) != len(before[i]) {
			t.Errorf("dry run changed n%d: %d records, want %d", i+1, len(got), len(before[i]))
		}
	}

	p := runRepair(t, c, 0, &kvpb.RepairRequest{})
	if p.GetState() != kvpb.RepairState_REPAIR_STATE_DONE || p.GetRangesDone() != p.GetRangesTotal() {
		t.Fatalf("repair: %s, %d of %d ranges, err %q; want done", p.GetState(), p.GetRangesDone(), p.GetRangesTotal(), p.GetError())
	}
	want := dump(t, sts[1])
	for i, st := range sts {
		got := dump(t, st)
		if len(got) != 1000 {
			t.Errorf("n%d holds %d records, want 1000", i+1, len(got))
		}
		for k, r := range want {
			if g, ok := got[k]; !ok || g.TS != r.TS || g.Tombstone != r.Tombstone || string(g.Value) != string(r.Value) {
				t.Errorf("n%d %s: got %+v (held %v), want %+v", i+1, k, g, ok, r)
				break
			}
		}
	}
	if r := want["key-0015"]; !r.Tombstone {
		t.Errorf("key-0015: got %+v, want the tombstone (newest) everywhere", r)
	}
	// Only the differing records' leaves streamed: with ~16 leaves per record, a few
	// neighbours at most, never the range.
	if p.GetKeysStreamed() < uint64(differ) || p.GetKeysStreamed() > uint64(3*differ) {
		t.Errorf("streamed %d records for %d differing; want between %d and %d", p.GetKeysStreamed(), differ, differ, 3*differ)
	}
	// Every node's primary ranges were covered: each reports its last repair.
	for i := range 3 {
		info, err := kvpb.NewAdminClient(dialNode(t, c.Config(i).GRPCAddr)).NodeInfo(context.Background(), &kvpb.NodeInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if info.GetLastRepairedUnix() == 0 {
			t.Errorf("n%d: last_repaired_unix 0 after a full repair", i+1)
		}
	}
	again := runRepair(t, c, 1, &kvpb.RepairRequest{})
	for _, pr := range again.GetPairs() {
		if pr.GetLeavesMismatched() != 0 {
			t.Errorf("second repair: %s/%s has %d mismatched leaves, want 0", pr.GetA(), pr.GetB(), pr.GetLeavesMismatched())
		}
	}
}

// TestRepairRefusals: an unknown node or vnode is invalid; a repair while one runs is refused;
// a replica that does not answer refuses the plan.
func TestRepairRefusals(t *testing.T) {
	c := startRepairCluster(t, nil)
	settle(t, c)
	admin := kvpb.NewAdminClient(dialNode(t, c.Config(0).GRPCAddr))
	ctx := context.Background()
	if _, err := admin.PlanRepair(ctx, &kvpb.RepairRequest{NodeId: "nope"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown node: got %v, want InvalidArgument", err)
	}
	if _, err := admin.PlanRepair(ctx, &kvpb.RepairRequest{Vnodes: []uint64{12345}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown vnode: got %v, want InvalidArgument", err)
	}
	plan, err := admin.PlanRepair(ctx, &kvpb.RepairRequest{NodeId: "n2"})
	if err != nil || len(plan.GetRanges()) != 3*16 || len(plan.GetRefusals()) != 0 || len(plan.GetPairs()) != 3 {
		t.Fatalf("plan: %d ranges, refusals %v, pairs %v, err %v; want 48 ranges, none, 3 pairs", len(plan.GetRanges()), plan.GetRefusals(), plan.GetPairs(), err)
	}
	if err := c.Stop(2); err != nil {
		t.Fatal(err)
	}
	plan, err = admin.PlanRepair(ctx, &kvpb.RepairRequest{})
	if err != nil || len(plan.GetRefusals()) == 0 {
		t.Errorf("plan with n3 down: refusals %v, err %v; want a refusal", plan.GetRefusals(), err)
	}
	if _, err := admin.StartRepair(ctx, &kvpb.RepairRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("start with n3 down: got %v, want FailedPrecondition (refused)", err)
	}
	if _, err := admin.AbortRepair(ctx, &kvpb.AbortRepairRequest{}); status.Code(err) != codes.NotFound {
		t.Errorf("abort without a repair: got %v, want NotFound", err)
	}
}

// TestDeleteDuringRepairStaysDeleted: keys deleted while a slow repair streams their old
// values to a replica that missed them stay deleted on every replica.
func TestDeleteDuringRepairStaysDeleted(t *testing.T) {
	c := startRepairCluster(t, nil)
	settle(t, c)
	sts := []*store.Store{c.Node(0).Store(), c.Node(1).Store(), c.Node(2).Store()}
	n := 3000
	if testing.Short() {
		// A third of the keys: ~0.5 MB, still two seconds and more of streaming at 256 KiB/s
		// for the 34 deletes to land in (and the test says so if they did not).
		n = 1000
	}
	for i := range n {
		k := fmt.Sprintf("d-%04d", i)
		v := store.Record{TS: hlc.Since(time.Now()), Value: make([]byte, 512)}
		apply(t, sts[0], k, v)
		apply(t, sts[1], k, v) // n3 missed them all
	}
	admin := kvpb.NewAdminClient(dialNode(t, c.Config(0).GRPCAddr))
	kv := kvpb.NewKVClient(dialNode(t, c.Config(1).GRPCAddr))
	// ~1.5 MB (-short: 0.5 MB) to stream at 256 KiB/s: the deletes below land while it streams.
	if _, err := admin.StartRepair(context.Background(), &kvpb.RepairRequest{RateBytes: 256 << 10}); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for i := 0; i < n; i += 30 {
		k := fmt.Sprintf("d-%04d", i)
		if _, err := kv.Delete(context.Background(), &kvpb.DeleteRequest{Key: []byte(k), Ack: 3, From: 3}); err != nil {
			t.Fatalf("delete %s: %v", k, err)
		}
		deleted = append(deleted, k)
	}
	running, err := admin.RepairStatus(context.Background(), &kvpb.RepairStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if running.GetState() != kvpb.RepairState_REPAIR_STATE_RUNNING {
		t.Logf("the repair ended before the deletes did (%s): the test checked less", running.GetState())
	}
	var p *kvpb.RepairProgress
	eventually.Succeeds(t, 3*time.Minute, func() error {
		p, err = admin.RepairStatus(context.Background(), &kvpb.RepairStatusRequest{})
		if err != nil || p.GetState() == kvpb.RepairState_REPAIR_STATE_RUNNING {
			return fmt.Errorf("repair still running (%v)", err)
		}
		return nil
	})
	if p.GetState() != kvpb.RepairState_REPAIR_STATE_DONE {
		t.Fatalf("repair: %s (%s)", p.GetState(), p.GetError())
	}
	for i, st := range sts {
		got := dump(t, st)
		held := 0
		for k := range got {
			if strings.HasPrefix(k, "d-") {
				held++
			}
		}
		if held != n {
			t.Errorf("n%d holds %d records, want %d", i+1, held, n)
		}
		for _, k := range deleted {
			if !got[k].Tombstone {
				t.Errorf("n%d %s: %+v, want the tombstone", i+1, k, got[k])
				break
			}
		}
	}
}

// TestPurgeNeverResurrects: n3 missed a delete (the tombstone reached n1 and n2 only: no
// hint will bring it). Before the grace passes a repair keeps the tombstone; after it, a
// repair is refused while n3 is down, so nothing is purged; once n3 is back, a repair brings
// it the tombstone, and only then is the tombstone purged, everywhere: the old value never
// comes back.
func TestPurgeNeverResurrects(t *testing.T) {
	var skew atomic.Int64 // the test clock: the wall clock plus skew
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	c := startRepairCluster(t, func(cfg *node.Config) {
		cfg.TombstoneGrace, cfg.MaxHintWindow = time.Hour, 30*time.Minute
		cfg.Now = now
	})
	settle(t, c)
	ctx := context.Background()
	key := []byte("zombie")
	tok := ring.Token(key)
	ts := hlc.Since(time.Now())
	for i := range 3 {
		apply(t, c.Node(i).Store(), string(key), store.Record{TS: ts, Value: []byte("old")})
	}
	for i := range 2 { // the delete n3 missed
		apply(t, c.Node(i).Store(), string(key), store.Record{TS: ts + 1, Tombstone: true})
	}
	has := func(i int) (store.Record, bool) {
		t.Helper()
		rec, found, err := c.Node(i).Store().Get(tok, key)
		if err != nil {
			t.Fatal(err)
		}
		return rec, found
	}

	if err := c.Stop(2); err != nil {
		t.Fatal(err)
	}
	admin := kvpb.NewAdminClient(dialNode(t, c.Config(0).GRPCAddr))
	// The grace passes.
	skew.Store(int64(2 * time.Hour))
	if _, err := admin.StartRepair(ctx, &kvpb.RepairRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("repair with n3 down: got %v, want refused", err)
	}
	for i := range 2 {
		if rec, found := has(i); !found || !rec.Tombstone {
			t.Fatalf("n%d: %+v found %v; want the tombstone kept (no completed repair)", i+1, rec, found)
		}
	}
	// n3 comes back holding the old value.
	if err := c.Restart(2); err != nil {
		t.Fatal(err)
	}
	if rec, _ := has(2); rec.Tombstone || string(rec.Value) != "old" {
		t.Fatalf("n3 after restart: %+v, want the old value it held", rec)
	}
	settle(t, c)
	p := runRepair(t, c, 0, &kvpb.RepairRequest{})
	if p.GetState() != kvpb.RepairState_REPAIR_STATE_DONE {
		t.Fatalf("repair: %s (%s)", p.GetState(), p.GetError())
	}
	// The tombstone reached n3 and was then purged on every replica: nothing is left.
	for i := range 3 {
		if rec, found := has(i); found {
			t.Errorf("n%d: %+v; want the tombstone purged", i+1, rec)
		}
	}
	// A further repair and quorum reads find no value.
	runRepair(t, c, 1, &kvpb.RepairRequest{})
	for i := range 3 {
		if rec, found := has(i); found {
			t.Errorf("n%d after a second repair: %+v, want nothing", i+1, rec)
		}
		_, err := kvpb.NewKVClient(dialNode(t, c.Config(i).GRPCAddr)).Get(ctx, &kvpb.GetRequest{Key: key, Ack: 3, From: 3})
		if status.Code(err) != codes.NotFound {
			t.Errorf("get through n%d: %v, want NotFound", i+1, err)
		}
	}
}

// TestPurgeWaitsForGrace: a repair within the grace spreads a tombstone and keeps it; the
// first repair after the grace purges it.
func TestPurgeWaitsForGrace(t *testing.T) {
	var skew atomic.Int64
	c := startRepairCluster(t, func(cfg *node.Config) {
		cfg.TombstoneGrace, cfg.MaxHintWindow = time.Hour, 30*time.Minute
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	settle(t, c)
	key := []byte("gone")
	tok := ring.Token(key)
	ts := hlc.Since(time.Now())
	apply(t, c.Node(0).Store(), string(key), store.Record{TS: ts, Tombstone: true})
	runRepair(t, c, 0, &kvpb.RepairRequest{})
	for i := range 3 {
		if rec, found, _ := c.Node(i).Store().Get(tok, key); !found || !rec.Tombstone {
			t.Errorf("n%d within the grace: %+v found %v; want the tombstone", i+1, rec, found)
		}
	}
	skew.Store(int64(2 * time.Hour))
	runRepair(t, c, 0, &kvpb.RepairRequest{})
	for i := range 3 {
		if rec, found, _ := c.Node(i).Store().Get(tok, key); found {
			t.Errorf("n%d after the grace: %+v; want the tombstone purged", i+1, rec)
		}
	}
}

// TestRingChangeStopsRepair: a ring change that begins while a repair runs stops it (state
// aborted, WatchRepair ends with it); while the change is in flight a repair is refused.
func TestRingChangeStopsRepair(t *testing.T) {
	c := startRepairCluster(t, func(cfg *node.Config) { cfg.ChangeRate = 4 << 10 })
	settle(t, c)
	ts := hlc.Since(time.Now())
	for i := range 2000 {
		k := fmt.Sprintf("c-%04d", i)
		for n := range 2 { // n3 misses them all
			apply(t, c.Node(n).Store(), k, store.Record{TS: ts, Value: make([]byte, 512)})
		}
	}
	admin := kvpb.NewAdminClient(dialNode(t, c.Config(0).GRPCAddr))
	ctx := context.Background()
	// ~1 MB at 64 KiB/s: the repair runs for many seconds.
	plan, err := admin.StartRepair(ctx, &kvpb.RepairRequest{RateBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := admin.WatchRepair(ctx, &kvpb.RepairStatusRequest{IntervalMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.StartRepair(ctx, &kvpb.RepairRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("second repair while one runs: got %v, want FailedPrecondition", err)
	}
	// Any node's Status shows the repair in flight, from its coordinator's NodeInfo.
	st, err := kvpb.NewAdminClient(dialNode(t, c.Config(2).GRPCAddr)).Status(ctx, &kvpb.StatusRequest{})
	if err != nil || len(st.GetRepairs()) != 1 || st.GetRepairs()[0].GetId() != plan.GetId() || st.GetRepairs()[0].GetCoordinator() != "n1" {
		t.Errorf("status through n3: repairs %v (err %v), want repair %d coordinated by n1", st.GetRepairs(), err, plan.GetId())
	}
	n4, err := c.StartEmpty("n4")
	if err != nil {
		t.Fatal(err)
	}
	startChange(t, admin, &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4", GrpcAddr: c.Config(n4).GRPCAddr})
	var last *kvpb.RepairProgress
	for {
		p, err := watch.Recv()
		if err != nil {
			break
		}
		last = p
	}
	if last.GetId() != plan.GetId() || last.GetState() != kvpb.RepairState_REPAIR_STATE_ABORTED || !strings.Contains(last.GetError(), "ring change") {
		t.Errorf("last WatchRepair message: repair %d %s %q; want repair %d aborted by the ring change", last.GetId(), last.GetState(), last.GetError(), plan.GetId())
	}
	if last.GetRangesDone() == last.GetRangesTotal() {
		t.Errorf("the repair finished (%d of %d ranges) before the change began: the test checked nothing", last.GetRangesDone(), last.GetRangesTotal())
	}
	if c.Node(0).View().Changing() {
		p, err := admin.PlanRepair(ctx, &kvpb.RepairRequest{})
		if err != nil || len(p.GetRefusals()) == 0 {
			t.Errorf("plan during a ring change: refusals %v (err %v), want one", p.GetRefusals(), err)
		}
		if _, err := admin.StartRepair(ctx, &kvpb.RepairRequest{}); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("repair during a ring change: got %v, want FailedPrecondition", err)
		}
	} else {
		t.Errorf("the change ended before the refusal could be checked")
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := admin.AbortChange(actx, &kvpb.AbortChangeRequest{}); err != nil {
		t.Fatalf("abort change: %v", err)
	}
}
