package server

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"ringkv/node/peers"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// StatsSource gives snapshots of a node's counters (metrics.Registry). Safe for concurrent use.
type StatsSource interface {
	Snapshot(withVnodes bool) *kvpb.NodeStats
}

// Describer describes this node for NodeInfo and Status. Safe for concurrent use; must not
// block for long.
type Describer interface {
	NodeInfo(ctx context.Context) *kvpb.NodeInfoResponse
}

// Profiler captures a profile of this process into w (admin.Capture). Safe for concurrent
// use; it blocks for the capture's length or until ctx ends.
type Profiler interface {
	Capture(ctx context.Context, kind string, seconds int, w io.Writer) error
}

// ProfilerFunc is a function as a Profiler.
type ProfilerFunc func(ctx context.Context, kind string, seconds int, w io.Writer) error

// Capture calls f.
func (f ProfilerFunc) Capture(ctx context.Context, kind string, seconds int, w io.Writer) error {
	return f(ctx, kind, seconds, w)
}

// LogSource keeps the node's recent log lines (metrics.LogRing). Safe for concurrent use.
type LogSource interface {
	Lines(n int) []string
}

// AdminDeps is what the Admin service delegates to. A nil interface leaves its RPCs
// Unimplemented.
type AdminDeps struct {
	// Node describes this node.
	Node Describer
	// View returns the ring the node routes by; nil while awaiting admission. Lock-free.
	View func() *ring.View
	// Peers reaches the other members for Status and Ring (Peers.Self is this node's id).
	Peers peers.Peers
	// Stats serves Stats and WatchStats.
	Stats StatsSource
	// Profiler serves Profile.
	Profiler Profiler
	// Logs serves LogTail.
	Logs LogSource
	// Changes serves the ring-change RPCs and CountRanges.
	Changes Changes
	// Repairs serves the repair RPCs (repair.Service).
	Repairs Repairs
	// HotKeys serves HotKeys; Heat serves Heat.
	HotKeys HotKeys
	Heat    HeatHistory
	// Latency serves Vnodes.
	Latency Latency
	// Draining is closed when the node starts to shut down: watch streams end then, so a
	// graceful stop does not wait for clients that would otherwise watch forever.
	Draining <-chan struct{}
}

// Admin implements the Admin service.
type Admin struct {
	kvpb.UnsafeAdminServer
	d AdminDeps
}

var _ kvpb.AdminServer = (*Admin)(nil)

// NewAdmin returns the Admin service on d.
func NewAdmin(d AdminDeps) *Admin { return &Admin{d: d} }

// Status reports every member as this node sees it; members that do not answer are DOWN.
func (s *Admin) Status(ctx context.Context, _ *kvpb.StatusRequest) (*kvpb.StatusResponse, error) {
	cur, ms := peers.Members(s.d.View())
	if cur == nil {
		info := s.d.Node.NodeInfo(ctx)
		return &kvpb.StatusResponse{Nodes: []*kvpb.NodeStatus{{Id: s.d.Peers.Self, GrpcAddr: info.GetGrpcAddr(), State: kvpb.NodeState_NODE_STATE_JOINING, Error: "awaiting admission", Info: info}}}, nil
	}
	infos, errs := peers.Infos(ctx, s.d.Peers, ms, s.d.Node.NodeInfo)
	resp := &kvpb.StatusResponse{Epoch: cur.Epoch(), Replicas: uint32(cur.Replicas())}
	for i, m := range ms {
		ns := &kvpb.NodeStatus{Id: m.ID, GrpcAddr: m.Addr, State: m.State.Proto(), Info: infos[i]}
		if errs[i] != nil {
			ns.State = ring.StateDown.Proto()
			ns.Error = peers.ErrorLine(errs[i])
			ns.Info = nil
		}
		resp.Nodes = append(resp.Nodes, ns)
	}
	if s.d.Changes != nil && s.d.Changes.Flying() {
		resp.Change = s.d.Changes.Progress(ctx)
	}
	views := map[string][]*kvpb.PeerLatency{}
	for _, info := range infos {
		if r := info.GetRepair(); r.GetState() == kvpb.RepairState_REPAIR_STATE_RUNNING {
			resp.Repairs = append(resp.Repairs, r)
		}
		if info != nil {
			views[info.GetId()] = info.GetPeerLatency()
		}
	}
	slow := kvpb.SlowForOthers(views)
	for _, ns := range resp.Nodes {
		ns.Slow = slow[ns.Id]
	}
	return resp, nil
}

// NodeInfo describes this node.
func (s *Admin) NodeInfo(ctx context.Context, _ *kvpb.NodeInfoRequest) (*kvpb.NodeInfoResponse, error) {
	return s.d.Node.NodeInfo(ctx), nil
}

// Ring returns the ring with per-node ownership; with counts, every member's key count and
// disk bytes (from its NodeInfo).
func (s *Admin) Ring(ctx context.Context, req *kvpb.RingRequest) (*kvpb.RingResponse, error) {
	cur, ms := peers.Members(s.d.View())
	if cur == nil {
		return nil, rpcerr.Encode(replica.ErrNotAdmitted)
	}
	resp := &kvpb.RingResponse{Ring: RingToProto(cur)}
	share, rshare := cur.Ownership(), cur.ReplicaOwnership()
	var infos []*kvpb.NodeInfoResponse
	var errs []error
	if req.GetWithCounts() {
		infos, errs = peers.Infos(ctx, s.d.Peers, ms, s.d.Node.NodeInfo)
	}
	for i, m := range ms {
		o := &kvpb.NodeOwnership{Id: m.ID, State: m.State.Proto(), Vnodes: uint32(len(m.Tokens)), Share: share[m.ID], ReplicaShare: rshare[m.ID]}
		if req.GetWithCounts() {
			if errs[i] != nil {
				o.Error = peers.ErrorLine(errs[i])
			} else {
				o.Keys, o.Bytes = infos[i].GetKeys(), infos[i].GetDiskBytes()
			}
		}
		resp.Ownership = append(resp.Ownership, o)
	}
	sort.Slice(resp.Ownership, func(i, j int) bool { return resp.Ownership[i].Id < resp.Ownership[j].Id })
	if s.d.Changes != nil && s.d.Changes.Flying() {
		resp.Change = s.d.Changes.Progress(ctx)
	}
	return resp, nil
}

// Stats returns one snapshot of this node's counters.
func (s *Admin) Stats(_ context.Context, req *kvpb.StatsRequest) (*kvpb.NodeStats, error) {
	if s.d.Stats == nil {
		return nil, rpcerr.Encode(fmt.Errorf("stats: %w", ErrUnimplemented))
	}
	return s.d.Stats.Snapshot(req.GetVnodes()), nil
}

// WatchStats pushes a snapshot every interval until the client goes away.
func (s *Admin) WatchStats(req *kvpb.StatsRequest, stream kvpb.Admin_WatchStatsServer) error {
	if s.d.Stats == nil {
		return rpcerr.Encode(fmt.Errorf("stats: %w", ErrUnimplemented))
	}
	return watchLoop(stream.Context(), s.d.Draining, time.Duration(req.GetIntervalMs())*time.Millisecond,
		nil, func() *kvpb.NodeStats { return s.d.Stats.Snapshot(req.GetVnodes()) }, stream.Send, nil)
}

// Profile streams a profile captured on this node.
func (s *Admin) Profile(req *kvpb.ProfileRequest, stream kvpb.Admin_ProfileServer) error {
	if s.d.Profiler == nil {
		return rpcerr.Encode(fmt.Errorf("profiles: %w", ErrUnimplemented))
	}
	w := &chunkWriter{send: func(b []byte) error { return stream.Send(&kvpb.ProfileChunk{Data: b}) }}
	if err := s.d.Profiler.Capture(stream.Context(), req.GetKind(), int(req.GetSeconds()), w); err != nil {
		return rpcerr.Encode(fmt.Errorf("profile %s: %w", req.GetKind(), err))
	}
	return nil
}

// LogTail returns the node's most recent log lines.
func (s *Admin) LogTail(_ context.Context, req *kvpb.LogTailRequest) (*kvpb.LogTailResponse, error) {
	if s.d.Logs == nil {
		return nil, rpcerr.Encode(fmt.Errorf("log tail: %w", ErrUnimplemented))
	}
	n := int(req.GetLines())
	if n <= 0 {
		n = 100
	}
	return &kvpb.LogTailResponse{Lines: s.d.Logs.Lines(n)}, nil
}

// RingToProto converts a ring to its wire form.
func RingToProto(r *ring.Ring) *kvpb.RingState {
	rs := &kvpb.RingState{Epoch: r.Epoch(), Replicas: uint32(r.ReplicationFactor())}
	for _, m := range r.Members() {
		rs.Members = append(rs.Members, &kvpb.Member{Id: m.ID, GrpcAddr: m.Addr, State: m.State.Proto(), Weight: uint32(m.Weight), Tokens: m.Tokens})
	}
	return rs
}

// chunkWriter sends what is written to it in chunks of at most 64 KiB.
type chunkWriter struct{ send func([]byte) error }

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), 64<<10)
		if err := w.send(append([]byte(nil), p[:k]...)); err != nil {
			return n, err
		}
		n += k
		p = p[k:]
	}
	return n, nil
}
