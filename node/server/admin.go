package server

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/node/cluster"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// StatsSource gives snapshots of a node's counters (metrics.Registry). Safe for concurrent use.
type StatsSource interface {
	Snapshot(withVnodes bool) *kvpb.NodeStats
}

// AdminDeps is what the Admin service delegates to.
type AdminDeps struct {
	// ID is this node's id.
	ID string
	// Info describes this node (NodeInfo). Must not block for long.
	Info func(ctx context.Context) *kvpb.NodeInfoResponse
	// View returns the ring the node routes by; nil while awaiting admission.
	View func() *ring.View
	// PeerAdmin returns an Admin client of another member by gRPC address; the node owns
	// the connections (with the cluster secret attached).
	PeerAdmin func(addr string) (kvpb.AdminClient, error)
	// PeerTimeout bounds each peer call of Status and Ring; 0 = 2s.
	PeerTimeout time.Duration
	// Stats serves Stats and WatchStats; nil leaves them Unimplemented.
	Stats StatsSource
	// Profile captures a profile into w (metrics.Capture); nil leaves Profile Unimplemented.
	Profile func(ctx context.Context, kind string, seconds int, w io.Writer) error
	// Logs returns the last n log lines (metrics.LogRing.Lines); nil leaves LogTail Unimplemented.
	Logs func(n int) []string
	// Changes is the ring-change API (cluster.Cluster); nil leaves ring changes Unimplemented.
	Changes Changes
	// MoveProgress is this node's progress on the moves it receives (cluster.Mover.Progress).
	MoveProgress func() []cluster.MoveProgress
	// Counter counts what this node stores in a token range (store.Store), for CountRanges.
	Counter RangeCounter
	// DefaultRate is the streaming throttle of a change whose request names none (bytes/s).
	DefaultRate uint64
	// Draining is closed when the node starts to shut down: watch streams end then, so a
	// graceful stop does not wait for clients that would otherwise watch forever.
	Draining <-chan struct{}
}

// Admin implements the Admin service.
type Admin struct {
	kvpb.UnsafeAdminServer
	d AdminDeps

	estMu sync.Mutex
	est   map[uint64]map[moveKey]rangeCount // per change: estimated keys/bytes per move
}

var _ kvpb.AdminServer = (*Admin)(nil)

// NewAdmin returns the Admin service on d.
func NewAdmin(d AdminDeps) *Admin {
	if d.PeerTimeout <= 0 {
		d.PeerTimeout = 2 * time.Second
	}
	return &Admin{d: d, est: map[uint64]map[moveKey]rangeCount{}}
}

// members returns the members of the current ring plus those only in the next one.
func (s *Admin) members() (*ring.Ring, []ring.Member) {
	v := s.d.View()
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

// infos asks every member for its NodeInfo in parallel; errs[i] is set for those that failed.
func (s *Admin) infos(ctx context.Context, ms []ring.Member) ([]*kvpb.NodeInfoResponse, []error) {
	return askMembers(ctx, s, ms,
		func() (*kvpb.NodeInfoResponse, bool) { return s.d.Info(ctx), true },
		func(ctx context.Context, c kvpb.AdminClient) (*kvpb.NodeInfoResponse, error) {
			return c.NodeInfo(ctx, &kvpb.NodeInfoRequest{})
		})
}

// askMembers calls ask on every member's Admin service in parallel, each call bounded by
// PeerTimeout; this node answers through local instead when local's ok is true. errs[i] is
// set for the members that failed.
func askMembers[T any](ctx context.Context, s *Admin, ms []ring.Member, local func() (T, bool),
	ask func(ctx context.Context, c kvpb.AdminClient) (T, error)) ([]T, []error) {
	out := make([]T, len(ms))
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		if m.ID == s.d.ID {
			if v, ok := local(); ok {
				out[i] = v
				continue
			}
		}
		wg.Go(func() {
			c, err := s.d.PeerAdmin(m.Addr)
			if err != nil {
				errs[i] = err
				return
			}
			cctx, cancel := context.WithTimeout(ctx, s.d.PeerTimeout)
			defer cancel()
			out[i], errs[i] = ask(cctx, c)
		})
	}
	wg.Wait()
	return out, errs
}

// Status reports every member as this node sees it; members that do not answer are DOWN.
func (s *Admin) Status(ctx context.Context, _ *kvpb.StatusRequest) (*kvpb.StatusResponse, error) {
	cur, ms := s.members()
	if cur == nil {
		info := s.d.Info(ctx)
		return &kvpb.StatusResponse{Nodes: []*kvpb.NodeStatus{{Id: s.d.ID, GrpcAddr: info.GetGrpcAddr(), State: "JOINING", Error: "awaiting admission", Info: info}}}, nil
	}
	infos, errs := s.infos(ctx, ms)
	resp := &kvpb.StatusResponse{Epoch: cur.Epoch(), Replicas: uint32(cur.Replicas())}
	for i, m := range ms {
		ns := &kvpb.NodeStatus{Id: m.ID, GrpcAddr: m.Addr, State: string(m.State), Info: infos[i]}
		if errs[i] != nil {
			ns.State = string(ring.StateDown)
			ns.Error = oneLine(errs[i])
			ns.Info = nil
		}
		resp.Nodes = append(resp.Nodes, ns)
	}
	if s.d.Changes != nil && s.d.Changes.Change() != nil {
		resp.Change = s.progress(ctx)
	}
	return resp, nil
}

// NodeInfo describes this node.
func (s *Admin) NodeInfo(ctx context.Context, _ *kvpb.NodeInfoRequest) (*kvpb.NodeInfoResponse, error) {
	return s.d.Info(ctx), nil
}

// Ring returns the ring with per-node ownership; with counts, every member's key count and
// disk bytes (from its NodeInfo).
func (s *Admin) Ring(ctx context.Context, req *kvpb.RingRequest) (*kvpb.RingResponse, error) {
	cur, ms := s.members()
	if cur == nil {
		return nil, GRPCError(replica.ErrNotAdmitted)
	}
	resp := &kvpb.RingResponse{Ring: RingToProto(cur)}
	share, rshare := cur.Ownership(), cur.ReplicaOwnership()
	var infos []*kvpb.NodeInfoResponse
	var errs []error
	if req.GetWithCounts() {
		infos, errs = s.infos(ctx, ms)
	}
	for i, m := range ms {
		o := &kvpb.NodeOwnership{Id: m.ID, State: string(m.State), Vnodes: uint32(len(m.Tokens)), Share: share[m.ID], ReplicaShare: rshare[m.ID]}
		if req.GetWithCounts() {
			if errs[i] != nil {
				o.Error = oneLine(errs[i])
			} else {
				o.Keys, o.Bytes = infos[i].GetKeys(), infos[i].GetDiskBytes()
			}
		}
		resp.Ownership = append(resp.Ownership, o)
	}
	sort.Slice(resp.Ownership, func(i, j int) bool { return resp.Ownership[i].Id < resp.Ownership[j].Id })
	if s.d.Changes != nil && s.d.Changes.Change() != nil {
		resp.Change = s.progress(ctx)
	}
	return resp, nil
}

// Stats returns one snapshot of this node's counters.
func (s *Admin) Stats(_ context.Context, req *kvpb.StatsRequest) (*kvpb.NodeStats, error) {
	if s.d.Stats == nil {
		return nil, status.Error(codes.Unimplemented, "stats: issue 5")
	}
	return s.d.Stats.Snapshot(req.GetVnodes()), nil
}

// WatchStats pushes a snapshot every interval until the client goes away.
func (s *Admin) WatchStats(req *kvpb.StatsRequest, stream kvpb.Admin_WatchStatsServer) error {
	if s.d.Stats == nil {
		return status.Error(codes.Unimplemented, "stats: issue 5")
	}
	every := time.Duration(req.GetIntervalMs()) * time.Millisecond
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := stream.Send(s.d.Stats.Snapshot(req.GetVnodes())); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-s.d.Draining:
			return status.Error(codes.Unavailable, "node is shutting down")
		case <-t.C:
		}
	}
}

// Profile streams a profile captured on this node.
func (s *Admin) Profile(req *kvpb.ProfileRequest, stream kvpb.Admin_ProfileServer) error {
	if s.d.Profile == nil {
		return status.Error(codes.Unimplemented, "profiles: issue 5")
	}
	w := &chunkWriter{send: func(b []byte) error { return stream.Send(&kvpb.ProfileChunk{Data: b}) }}
	if err := s.d.Profile(stream.Context(), req.GetKind(), int(req.GetSeconds()), w); err != nil {
		return GRPCError(fmt.Errorf("profile %s: %w", req.GetKind(), err))
	}
	return nil
}

// LogTail returns the node's most recent log lines.
func (s *Admin) LogTail(_ context.Context, req *kvpb.LogTailRequest) (*kvpb.LogTailResponse, error) {
	if s.d.Logs == nil {
		return nil, GRPCError(fmt.Errorf("log tail: %w", ErrUnimplemented))
	}
	n := int(req.GetLines())
	if n <= 0 {
		n = 100
	}
	return &kvpb.LogTailResponse{Lines: s.d.Logs(n)}, nil
}

// RingToProto converts a ring to its wire form.
func RingToProto(r *ring.Ring) *kvpb.RingState {
	rs := &kvpb.RingState{Epoch: r.Epoch(), Replicas: uint32(r.ReplicationFactor())}
	for _, m := range r.Members() {
		rs.Members = append(rs.Members, &kvpb.Member{Id: m.ID, GrpcAddr: m.Addr, State: string(m.State), Weight: uint32(m.Weight), Tokens: m.Tokens})
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

// oneLine is the gRPC message of err (or its text), for NodeStatus.error.
func oneLine(err error) string {
	if s, ok := status.FromError(err); ok {
		return fmt.Sprintf("%s: %s", s.Code(), s.Message())
	}
	return err.Error()
}
