package tui

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"ringkv/proto/kvpb"
)

// FakeSource is a Source with known numbers, for tests and screenshots: three nodes n1..n3
// with FakeVnodes vnodes each, interleaved on the ring, one hot vnode owned by n2, and a script of
// FakeSamples stats samples per node already queued on Stats. Send queues more.
type FakeSource struct {
	mu         sync.Mutex
	statusResp *kvpb.StatusResponse
	ringResp   *kvpb.RingResponse
	stats      chan *kvpb.NodeStats
	changes    chan *kvpb.ChangeProgress
	once       sync.Once
}

// Sizes of the fake cluster.
const (
	FakeNodes   = 3
	FakeVnodes  = 96
	FakeSamples = 20
)

var _ Source = (*FakeSource)(nil)

// NewFakeSource returns the fake cluster with its script queued.
func NewFakeSource() *FakeSource {
	ids := []string{"n1", "n2", "n3"}
	step := math.MaxUint64 / uint64(FakeNodes*FakeVnodes)
	members := make([]*kvpb.Member, FakeNodes)
	st := &kvpb.StatusResponse{Epoch: 7, Replicas: 3}
	for i, id := range ids {
		members[i] = &kvpb.Member{Id: id, GrpcAddr: fmt.Sprintf("127.0.0.1:909%d", i+1), State: kvpb.NodeState_NODE_STATE_UP, Weight: 1}
		st.Nodes = append(st.Nodes, &kvpb.NodeStatus{Id: id, GrpcAddr: members[i].GrpcAddr, State: kvpb.NodeState_NODE_STATE_UP})
	}
	for k := 0; k < FakeNodes*FakeVnodes; k++ {
		members[k%FakeNodes].Tokens = append(members[k%FakeNodes].Tokens, uint64(k+1)*step)
	}
	ring := &kvpb.RingResponse{Ring: &kvpb.RingState{Epoch: 7, Replicas: 3, Members: members}}
	for i, id := range ids {
		ring.Ownership = append(ring.Ownership, &kvpb.NodeOwnership{Id: id, State: kvpb.NodeState_NODE_STATE_UP, Vnodes: FakeVnodes, Share: []float64{0.34, 0.33, 0.33}[i]})
	}
	f := &FakeSource{
		statusResp: st,
		ringResp:   ring,
		stats:      make(chan *kvpb.NodeStats, FakeNodes*FakeSamples+64),
		changes:    make(chan *kvpb.ChangeProgress, 8),
	}
	f.changes <- fakeChange()
	for s := 0; s < FakeSamples; s++ {
		for i := range members {
			f.stats <- fakeStats(members, i, s, step)
		}
	}
	return f
}

// fakeStats is node i's sample number s. As a real node does, it reports every range it
// replicates (with N=3 on three nodes: all of them): reads spread over the three replicas,
// writes reach each. The load is steady per range, the 10th range n2 owns is hot, and the
// node's ops/s rises and falls so the sparkline has a shape.
func fakeStats(members []*kvpb.Member, i, s int, step uint64) *kvpb.NodeStats {
	m := members[i]
	ns := &kvpb.NodeStats{Id: m.Id, Epoch: 7, State: kvpb.NodeState_NODE_STATE_UP}
	var ops float64
	for k := range FakeNodes * FakeVnodes {
		o, ko := k%FakeNodes, k/FakeNodes // owner and the owner's vnode number
		reads, writes := float64((ko*37+o*11)%50+1), float64((ko*13+o*7)%20+1)
		if o == 1 && ko == 9 {
			reads, writes = 4000, 1000
		}
		t := uint64(k+1) * step
		keys := uint64(100 + ko*3 + o)
		ns.Vnodes = append(ns.Vnodes, &kvpb.VnodeStats{
			Token: t, Start: t - step,
			Reads_1S: reads / FakeNodes, Writes_1S: writes,
			Keys: keys, Bytes: keys * fakeBytesPerKey,
		})
		if o == i {
			ops += reads + writes
		}
		ns.Keys += keys
		ns.DiskBytes += keys * fakeBytesPerKey
	}
	ns.OpsPerSec = ops * (0.5 + 0.5*float64((s*7+i*3)%FakeSamples)/FakeSamples)
	ns.P99Ms = 2.5 + float64(i)
	ns.Ops = []*kvpb.OpStats{
		{Op: kvpb.Op_OP_GET, Role: kvpb.OpRole_OP_ROLE_COORDINATOR, Rate_1S: 300, P50Ms: 0.4 + 0.1*float64(i), P99Ms: ns.P99Ms},
		{Op: kvpb.Op_OP_PUT, Role: kvpb.OpRole_OP_ROLE_COORDINATOR, Rate_1S: 100, P50Ms: 0.8 + 0.1*float64(i), P99Ms: ns.P99Ms},
	}
	for j, p := range []string{"n1", "n2", "n3"} {
		if j != i {
			state := kvpb.BreakerState_CLOSED
			if i == 2 && p == "n1" {
				state = kvpb.BreakerState_OPEN
			}
			ns.Breakers = append(ns.Breakers, &kvpb.BreakerState{Peer: p, State: state})
		}
	}
	return ns
}

// Status implements Source.
func (f *FakeSource) Status(context.Context) (*kvpb.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statusResp, nil
}

// Ring implements Source.
func (f *FakeSource) Ring(context.Context) (*kvpb.RingResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ringResp, nil
}

// Drain answers from now on as the cluster does once id was drained: id is gone from the
// status and the ring, its vnodes shared by the others.
func (f *FakeSource) Drain(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := proto.Clone(f.statusResp).(*kvpb.StatusResponse)
	rg := proto.Clone(f.ringResp).(*kvpb.RingResponse)
	st.Epoch++
	rg.Ring.Epoch++
	st.Nodes = slices.DeleteFunc(st.Nodes, func(n *kvpb.NodeStatus) bool { return n.GetId() == id })
	var gone []uint64
	rg.Ring.Members = slices.DeleteFunc(rg.Ring.Members, func(m *kvpb.Member) bool {
		if m.GetId() == id {
			gone = m.GetTokens()
		}
		return m.GetId() == id
	})
	for i, t := range gone {
		m := rg.Ring.Members[i%len(rg.Ring.Members)]
		m.Tokens = append(m.Tokens, t)
	}
	rg.Ownership = slices.DeleteFunc(rg.Ownership, func(o *kvpb.NodeOwnership) bool { return o.GetId() == id })
	for _, o := range rg.Ownership {
		o.Share = 1 / float64(len(rg.Ownership))
		o.Vnodes = FakeNodes * FakeVnodes / uint32(len(rg.Ownership))
	}
	f.statusResp, f.ringResp = st, rg
}

// Stats implements Source.
func (f *FakeSource) Stats() <-chan *kvpb.NodeStats { return f.stats }

// Changes implements Source.
func (f *FakeSource) Changes() <-chan *kvpb.ChangeProgress { return f.changes }

// SendChange queues a change progress report.
func (f *FakeSource) SendChange(p *kvpb.ChangeProgress) { f.changes <- p }

// Close closes the streams, ending the console's receivers.
func (f *FakeSource) Close() {
	f.once.Do(func() {
		close(f.stats)
		close(f.changes)
	})
}

// FakeActions answers every action with canned results that follow the request and the
// fake cluster of FakeSource: draining a node moves all its vnodes to the other two, adding
// one gives the newcomer a quarter of the ring, rebalancing moves vnodes off the hot n2.
type FakeActions struct{}

var _ Actions = FakeActions{}

// fakeShares are the fake cluster's shares of the token space (see NewFakeSource).
var fakeShares = []struct {
	id    string
	share float64
}{{"n1", 0.34}, {"n2", 0.33}, {"n3", 0.33}}

// fakeBytesPerKey is what a key weighs in the fake plans (the fake stats use 128 too).
const fakeBytesPerKey = 128

// PlanChange implements Actions.
func (FakeActions) PlanChange(_ context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error) {
	p := &kvpb.ChangePlan{Id: 1, Request: req, FromEpoch: 7, ToEpoch: 8}
	type own struct {
		share  float64
		vnodes uint32
	}
	after := map[string]own{}
	for _, s := range fakeShares {
		p.Before = append(p.Before, &kvpb.NodeOwnership{Id: s.id, Share: s.share, Vnodes: FakeVnodes})
		after[s.id] = own{s.share, FakeVnodes}
	}
	var moved uint32
	switch req.GetKind() {
	case kvpb.ChangeRequest_REMOVE:
		gone, ok := after[req.GetNodeId()]
		if !ok {
			return nil, fmt.Errorf("plan drain %s: unknown node", req.GetNodeId())
		}
		delete(after, req.GetNodeId())
		for id, o := range after {
			after[id] = own{o.share + gone.share/float64(len(after)), o.vnodes + gone.vnodes/uint32(len(after))}
		}
		after[req.GetNodeId()] = own{}
		moved = gone.vnodes
	case kvpb.ChangeRequest_ADD:
		for id, o := range after {
			after[id] = own{o.share * 0.75, o.vnodes}
		}
		after[req.GetNodeId()] = own{0.25, FakeVnodes}
		moved = FakeVnodes
	default: // rebalance: 8 vnodes leave the hot n2
		after["n1"] = own{0.38, FakeVnodes + 4}
		after["n2"] = own{0.25, FakeVnodes - 8}
		after["n3"] = own{0.37, FakeVnodes + 4}
		moved = 8
		p.Request = proto.Clone(req).(*kvpb.ChangeRequest)
		for i := range moved {
			to := "n1"
			if i%2 == 1 {
				to = "n3"
			}
			p.Request.TokenMoves = append(p.Request.TokenMoves, &kvpb.TokenMove{Token: uint64(i+1) << 56, From: "n2", To: to, Load: 40})
		}
	}
	for _, s := range fakeShares {
		a := after[s.id]
		p.After = append(p.After, &kvpb.NodeOwnership{Id: s.id, Share: a.share, Vnodes: a.vnodes})
	}
	if req.GetKind() == kvpb.ChangeRequest_ADD {
		a := after[req.GetNodeId()]
		p.After = append(p.After, &kvpb.NodeOwnership{Id: req.GetNodeId(), Share: a.share, Vnodes: a.vnodes})
	}
	p.Moves = make([]*kvpb.RangeMove, moved)
	p.EstKeys = uint64(moved) * 50
	p.EstBytes = p.EstKeys * fakeBytesPerKey
	return p, nil
}

// StartChange implements Actions.
func (a FakeActions) StartChange(ctx context.Context, req *kvpb.ChangeRequest) (*kvpb.ChangePlan, error) {
	return a.PlanChange(ctx, req)
}

// CPUProfile implements Actions.
func (FakeActions) CPUProfile(_ context.Context, id, _ string, _ int) (ProfileResult, error) {
	return ProfileResult{Path: "cpu-" + id + ".pb.gz", Top: []string{"  41.0%  runtime.memmove", "  12.5%  badger.(*DB).Get"}}, nil
}

// StartBench implements Actions.
func (FakeActions) StartBench(context.Context, int) error { return nil }

// StopBench implements Actions.
func (FakeActions) StopBench(context.Context) (string, error) {
	return FakeBenchResult, nil
}

// FakeBenchResult is what the fake's stopped bench measured.
const FakeBenchResult = "2400 requests in 4.8s (500/s), 100.00% ok, p50 0.40ms, p99 2.10ms"

// fakeChange is a rebalance half-way through: four ranges, one done, two streaming.
func fakeChange() *kvpb.ChangeProgress {
	mv := func(i int, src, dst string) *kvpb.RangeMove {
		return &kvpb.RangeMove{Start: uint64(i) << 60, End: uint64(i+1) << 60, Source: src, Target: dst, EstKeys: 1000, EstBytes: 128000}
	}
	return &kvpb.ChangeProgress{
		Id: 3, State: kvpb.ChangeState_CHANGE_STATE_STREAMING,
		Plan: &kvpb.ChangePlan{Id: 3, Request: &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REBALANCE}, FromEpoch: 7, ToEpoch: 8},
		Ranges: []*kvpb.RangeProgress{
			{Move: mv(1, "n2", "n1"), State: kvpb.MoveState_MOVE_STATE_DONE, KeysDone: 1000, BytesDone: 128000},
			{Move: mv(2, "n2", "n1"), State: kvpb.MoveState_MOVE_STATE_STREAMING, KeysDone: 500, BytesDone: 64000},
			{Move: mv(3, "n2", "n3"), State: kvpb.MoveState_MOVE_STATE_STREAMING, KeysDone: 250, BytesDone: 32000},
			{Move: mv(4, "n2", "n3"), State: kvpb.MoveState_MOVE_STATE_PENDING},
		},
		KeysDone: 1750, BytesDone: 224000, KeysTotal: 4000, BytesTotal: 512000,
		RateBytesPerSec: 51200, EtaSeconds: 5.6,
		Paces: []*kvpb.Pace{
			{NodeId: "n1", RateBytes: 12 << 20, P99Ms: 9.1, TargetMs: 6, Reason: kvpb.PaceReason_PACE_REASON_BACKING_OFF},
			{NodeId: "n2", Sending: true, RateBytes: 64 << 20, LimitBytes: 64 << 20, P99Ms: 3.2, TargetMs: 6, Reason: kvpb.PaceReason_PACE_REASON_AT_CEILING},
		},
	}
}

// PauseChange implements ChangePauser: the fake change, paused by the console.
func (FakeActions) PauseChange(_ context.Context, reason string) (*kvpb.ChangeProgress, error) {
	return fakePausedChange("kvctl@console", reason), nil
}

// ResumeChange implements ChangePauser.
func (FakeActions) ResumeChange(context.Context) (*kvpb.ChangeProgress, error) {
	p := fakeChange()
	p.Pauses = []*kvpb.ChangePause{{By: "kvctl@console", PausedUnix: fixedNow.Add(-time.Minute).Unix(), ResumedBy: "kvctl@console", ResumedUnix: fixedNow.Unix()}}
	return p, nil
}

// fakePausedChange is fakeChange paused by by, 1m12s before fixedNow, for reason: nothing
// streams, writes still wait for one pending replica.
func fakePausedChange(by, reason string) *kvpb.ChangeProgress {
	p := fakeChange()
	p.State, p.RateBytesPerSec, p.Paces, p.PendingReplicas = kvpb.ChangeState_CHANGE_STATE_PAUSED, 0, nil, 1
	for _, r := range p.Ranges {
		if r.State == kvpb.MoveState_MOVE_STATE_STREAMING {
			r.State = kvpb.MoveState_MOVE_STATE_PENDING
		}
	}
	p.Pauses = []*kvpb.ChangePause{{By: by, Reason: reason, PausedUnix: fixedNow.Add(-72 * time.Second).Unix()}}
	p.PausedSeconds = 72
	return p
}

// fakeStalledChange is fakeChange with its source n2 gone quiet: both ranges streaming to n3
// and n1 stalled since 15:03:05 UTC.
func fakeStalledChange() *kvpb.ChangeProgress {
	p := fakeChange()
	since := time.Date(2025, 1, 2, 15, 3, 5, 0, time.UTC).Unix()
	for _, r := range p.Ranges[1:3] {
		r.Stall = &kvpb.MoveStall{Cause: kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE, Source: "n2", Receiver: r.Move.Target, SinceUnix: since,
			Reason: "REPLICA_UNAVAILABLE", Error: "connection refused"}
	}
	p.StalledMoves, p.RateBytesPerSec, p.EtaSeconds, p.Paces = 2, 0, 0, nil
	return p
}

// Repair answers from now on as the cluster does while p is in flight: Status lists it and
// its coordinator's NodeInfo carries it.
func (f *FakeSource) Repair(p *kvpb.RepairProgress) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := proto.Clone(f.statusResp).(*kvpb.StatusResponse)
	st.Repairs = []*kvpb.RepairProgress{p}
	for _, n := range st.Nodes {
		if n.GetId() == p.GetCoordinator() {
			n.Info = &kvpb.NodeInfoResponse{Id: n.GetId(), Repair: p}
		}
	}
	f.statusResp = st
}

// fakeRepair is a repair of n3's ranges coordinated by n1, a third through: n3 missed writes,
// which n1 and n2 stream to it.
func fakeRepair() *kvpb.RepairProgress {
	return &kvpb.RepairProgress{
		Id: 2, Coordinator: "n1", State: kvpb.RepairState_REPAIR_STATE_RUNNING,
		Plan:       &kvpb.RepairPlan{Id: 2, Epoch: 7, Request: &kvpb.RepairRequest{NodeId: "n3"}, Pairs: []string{"n1/n2", "n1/n3", "n2/n3"}},
		Ranges:     []*kvpb.RangeRepair{{State: kvpb.RangeRepairState_RANGE_REPAIR_STATE_STREAMING}},
		RangesDone: 96, RangesTotal: 288,
		Pairs: []*kvpb.PairRepair{
			{A: "n1", B: "n2", LeavesCompared: 6144},
			{A: "n1", B: "n3", LeavesCompared: 6144, LeavesMismatched: 210, KeysToB: 1400, BytesStreamed: 179200},
			{A: "n2", B: "n3", LeavesCompared: 6144, LeavesMismatched: 205, KeysToB: 1380, BytesStreamed: 176640},
		},
		KeysStreamed: 2780, BytesStreamed: 355840, KeysCompared: 28800,
		RateBytesPerSec: 40960, EtaSeconds: 18, StartedUnix: fixedNow.Add(-9 * time.Second).Unix(),
	}
}

// PauseRepair implements RepairPauser: the fake repair, paused by the console.
func (FakeActions) PauseRepair(_ context.Context, reason string) (*kvpb.RepairProgress, error) {
	p := fakeRepair()
	p.Paused = &kvpb.ChangePause{By: "kvctl@console", PausedUnix: fixedNow.Unix(), Reason: reason}
	return p, nil
}

// ResumeRepair implements RepairPauser.
func (FakeActions) ResumeRepair(context.Context) (*kvpb.RepairProgress, error) {
	return fakeRepair(), nil
}
