// Package cluster holds a ringkv cluster's metadata — the ring and the ring change in flight —
// in a hashicorp/raft group whose transport runs over the nodes' gRPC port. Every node reads
// its local copy without blocking (View); changes go through the raft leader, to which any
// node forwards them.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// Peer is one founding member: its id and gRPC address.
type Peer struct {
	ID   string
	Addr string
}

// ParsePeers parses the --peers flag: "id=host:port,id=host:port".
func ParsePeers(s string) ([]Peer, error) {
	var peers []Peer
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q is not id=grpcaddr: %w", part, ErrInvalidArgument)
		}
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	return peers, nil
}

// Config configures a node's member of the metadata group.
type Config struct {
	// ID is the node's id, unique in the cluster; also its raft server id.
	ID string
	// GRPCAddr is the node's gRPC address as other nodes dial it; also its raft address.
	GRPCAddr string
	// Dir holds raft's log, stable store, snapshots and the local copy of the ring
	// (the node uses <data-dir>/raft). Ignored when InMemory.
	Dir string
	// InMemory keeps raft's state in memory (for --in-memory nodes): nothing survives a restart.
	InMemory bool
	// Peers are the founders, this node included, the same list on every founder. Empty: the
	// node waits until a ring change admits it.
	Peers []Peer
	// Replicas is the replication factor fixed at founding; Vnodes the tokens per node.
	Replicas int
	Vnodes   int
	// MaxVoters caps raft voters; the group keeps an odd number of them (Voters), and the
	// other members are non-voters.
	MaxVoters int
	// DeadVoterAfter is how long a voter may miss the leader's heartbeats before the leader
	// hands its vote to a live non-voter (0: never).
	DeadVoterAfter time.Duration
	// ApplyTimeout bounds one raft apply or membership change on the leader.
	ApplyTimeout time.Duration
	// ReconcileInterval is how often the leader retries its duties (journal the founders' ring,
	// admit members to raft, commit a change whose moves are done) without a trigger.
	ReconcileInterval time.Duration
	// RemoveGrace is how long the leader keeps a departed member (drained, or the newcomer of
	// an aborted add) in raft after it left the ring, so that it learns the outcome and deletes
	// its data before it stops hearing from the group.
	RemoveGrace time.Duration
	// DialOptions are used for every gRPC connection to a peer (credentials, the cluster
	// secret); nil = insecure.
	DialOptions []grpc.DialOption
	// Raft timing; zero = raft's defaults.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// RaftLogLevel is the level of raft's own log lines (hclog names: warn, info, debug).
	RaftLogLevel string
	Logger       *slog.Logger
}

// DefaultConfig returns a Config with defaults; the caller sets ID, GRPCAddr, Dir and Peers.
func DefaultConfig() Config {
	return Config{
		Replicas:          3,
		Vnodes:            64,
		MaxVoters:         5,
		ApplyTimeout:      10 * time.Second,
		ReconcileInterval: time.Second,
		RemoveGrace:       5 * time.Second,
		DeadVoterAfter:    10 * time.Second,
		RaftLogLevel:      "warn",
	}
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("cluster: empty id: %w", ErrInvalidArgument)
	case c.GRPCAddr == "":
		return fmt.Errorf("cluster: empty grpc address: %w", ErrInvalidArgument)
	case c.Dir == "" && !c.InMemory:
		return fmt.Errorf("cluster: empty dir: %w", ErrInvalidArgument)
	case c.Replicas < 1:
		return fmt.Errorf("cluster: replicas %d < 1: %w", c.Replicas, ErrInvalidArgument)
	case c.Vnodes < 1:
		return fmt.Errorf("cluster: vnodes %d < 1: %w", c.Vnodes, ErrInvalidArgument)
	case c.MaxVoters < 1:
		return fmt.Errorf("cluster: max voters %d < 1: %w", c.MaxVoters, ErrInvalidArgument)
	case c.ApplyTimeout <= 0 || c.ReconcileInterval <= 0 || c.RemoveGrace < 0 || c.DeadVoterAfter < 0:
		return fmt.Errorf("cluster: non-positive timeout: %w", ErrInvalidArgument)
	}
	if len(c.Peers) > 0 {
		ids, addrs := map[string]bool{}, map[string]bool{}
		self := false
		for _, p := range c.Peers {
			if ids[p.ID] || addrs[p.Addr] {
				return fmt.Errorf("cluster: peer %s=%s listed twice: %w", p.ID, p.Addr, ErrInvalidArgument)
			}
			ids[p.ID], addrs[p.Addr] = true, true
			if p.ID == c.ID {
				if p.Addr != c.GRPCAddr {
					return fmt.Errorf("cluster: peers list %s at %s, this node is at %s: %w", p.ID, p.Addr, c.GRPCAddr, ErrInvalidArgument)
				}
				self = true
			}
		}
		if !self {
			return fmt.Errorf("cluster: peers do not include this node %s: %w", c.ID, ErrInvalidArgument)
		}
	}
	return nil
}

// Cluster is one node's member of the metadata group. Reads (View, Epoch, Change) never block
// and are safe for concurrent use; so are the change methods, which forward to the leader.
type Cluster struct {
	cfg     Config
	logger  *slog.Logger
	fsm     *fsm
	raft    *raft.Raft
	trans   *raft.NetworkTransport
	layer   *streamLayer
	clients *peerClients
	closers []func() error
	founder *ring.Ring // the founders' ring, nil for a node awaiting admission
	hasRing bool       // a ring was on disk at start

	// departed: when the leader first saw each raft server outside the ring (Run's goroutine only).
	departed map[string]time.Time
	// silent: the raft servers that miss this node's heartbeats while it leads, and since when.
	silent *silence

	closeOnce sync.Once
	closeErr  error
}

// New opens (or creates) the node's raft state and starts raft. Founders without raft state on
// disk bootstrap the group with every founder (voters up to MaxVoters, then non-voters); a node
// with state recovers it; a node without peers and without state waits to be admitted.
// Raft traffic arrives through the Cluster service: Register it on the node's gRPC server.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "cluster")
	c := &Cluster{cfg: cfg, logger: logger, departed: map[string]time.Time{}, silent: newSilence()}
	ok := false
	defer func() {
		if !ok {
			c.closeAll()
		}
	}()

	hlog := raftLogger(logger, cfg.RaftLogLevel)

	var (
		logs   raft.LogStore
		stable raft.StableStore
		snaps  raft.SnapshotStore
	)
	statePath := ""
	if cfg.InMemory {
		mem := raft.NewInmemStore()
		logs, stable, snaps = mem, mem, raft.NewInmemSnapshotStore()
	} else {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("cluster dir: %w", err)
		}
		bolt, err := raftboltdb.NewBoltStore(filepath.Join(cfg.Dir, "raft.db"))
		if err != nil {
			return nil, fmt.Errorf("open raft store: %w", err)
		}
		c.closers = append(c.closers, bolt.Close)
		logs, stable = bolt, bolt
		fss, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
		if err != nil {
			return nil, fmt.Errorf("open raft snapshots: %w", err)
		}
		snaps = fss
		statePath = filepath.Join(cfg.Dir, "ring.json")
	}

	c.fsm = newFSM(statePath, logger)
	hasRing, err := c.fsm.loadLocal()
	if err != nil {
		return nil, err
	}
	c.hasRing = hasRing
	if len(cfg.Peers) > 0 {
		c.founder, err = founderRing(cfg)
		if err != nil {
			return nil, err
		}
	}

	c.clients = newPeerClients(cfg.DialOptions)
	c.layer = newStreamLayer(cfg.GRPCAddr, c.clients)
	c.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  c.layer,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  hlog,
	})

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.SnapshotThreshold = 1024
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	}
	existing, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return nil, fmt.Errorf("inspect raft state: %w", err)
	}
	if !existing && len(cfg.Peers) > 0 {
		// Every founder writes the same first configuration before raft starts, the non-voters
		// too (raft's live bootstrap refuses a node that would not vote): the voters elect a
		// leader among themselves, which then finds the non-voters' logs already matching.
		conf := founderConfiguration(cfg.Peers, cfg.MaxVoters)
		if err := raft.BootstrapCluster(rc, logs, stable, snaps, c.trans, conf); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return nil, fmt.Errorf("bootstrap raft: %w", err)
		}
		role := "non-voter"
		if hasVote(conf, cfg.ID) {
			role = "voter"
		}
		logger.Info("bootstrapped cluster metadata", "founders", len(cfg.Peers), "voters", Voters(len(cfg.Peers), cfg.MaxVoters), "role", role)
	}
	c.raft, err = raft.NewRaft(rc, c.fsm, logs, stable, snaps, c.trans)
	if err != nil {
		return nil, fmt.Errorf("start raft: %w", err)
	}
	c.raft.RegisterObserver(raft.NewObserver(nil, false, c.silent.observe))
	switch {
	case existing:
		logger.Info("recovered cluster metadata from disk", "dir", cfg.Dir, "ring", c.hasRing)
	case len(cfg.Peers) == 0:
		logger.Info("no ring: awaiting admission by a ring change")
	}
	if !c.hasRing && c.founder != nil {
		c.fsm.provisional(c.founder, cfg.Replicas)
	}
	ok = true
	return c, nil
}

func founderRing(cfg Config) (*ring.Ring, error) {
	ids := make([]string, len(cfg.Peers))
	for i, p := range cfg.Peers {
		ids[i] = p.ID
	}
	tokens := ring.FounderTokens(ids, cfg.Vnodes)
	members := make([]ring.Member, 0, len(cfg.Peers))
	for _, p := range cfg.Peers {
		members = append(members, ring.Member{ID: p.ID, Addr: p.Addr, State: ring.StateUp, Weight: 1, Tokens: tokens[p.ID]})
	}
	slices.SortFunc(members, func(a, b ring.Member) int { return strings.Compare(a.ID, b.ID) })
	r, err := ring.New(1, cfg.Replicas, members)
	if err != nil {
		return nil, fmt.Errorf("founders' ring: %w", err)
	}
	return r, nil
}

// Voters is how many of members raft voters the metadata group keeps: as many as it can up
// to maxVoters, but an odd number — a fourth voter of four tolerates no more failures than
// three do, and makes the quorum larger.
func Voters(members, maxVoters int) int {
	n := min(members, maxVoters)
	if n > 1 && n%2 == 0 {
		n--
	}
	return max(n, 0)
}

// founderConfiguration is the founders' first raft configuration: the first Voters founders
// by id vote, the others are non-voters.
func founderConfiguration(peers []Peer, maxVoters int) raft.Configuration {
	sorted := slices.Clone(peers)
	slices.SortFunc(sorted, func(a, b Peer) int { return strings.Compare(a.ID, b.ID) })
	voters := Voters(len(sorted), maxVoters)
	var conf raft.Configuration
	for i, p := range sorted {
		s := raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)}
		if i >= voters {
			s.Suffrage = raft.Nonvoter
		}
		conf.Servers = append(conf.Servers, s)
	}
	return conf
}

// Register registers the Cluster service (raft transport and forwarded changes) on the node's
// gRPC server. The server's auth interceptor should treat /ringkv.Cluster/* like
// /ringkv.Replica/* (cluster secret).
func (c *Cluster) Register(s grpc.ServiceRegistrar) {
	kvpb.RegisterClusterServer(s, &service{c: c})
}

// View is the ring this node routes by: Current, plus Next while a change is in flight. Nil
// until the node has a ring (awaiting admission). Lock-free; share the value, never mutate it.
func (c *Cluster) View() *ring.View { return c.fsm.load().view }

// Epoch is the epoch of the current ring; 0 without a ring.
func (c *Cluster) Epoch() uint64 {
	if v := c.View(); v != nil && v.Current != nil {
		return v.Current.Epoch()
	}
	return 0
}

// WaitEpoch waits until this node's current ring is at epoch or later: what a node does when a
// peer's request carries a newer epoch (raft brings the entries; this only waits for them).
func (c *Cluster) WaitEpoch(ctx context.Context, epoch uint64) error {
	return c.waitFor(ctx, func(p *published) bool {
		return p.view != nil && p.view.Current != nil && p.view.Current.Epoch() >= epoch
	})
}

// WaitView waits until this node's view is vid or newer (ring.ViewID orders views): what a
// replica does before it serves a range for a change, and what a coordinator does when a
// replica refuses its view as stale.
func (c *Cluster) WaitView(ctx context.Context, vid ring.ViewID) error {
	return c.waitFor(ctx, func(p *published) bool {
		return p.view != nil && p.view.Current != nil && !p.view.ID().Less(vid)
	})
}

// WaitNewerView waits until this node's view is newer than stale (what a coordinator does
// when a replica refused its write as routed by a stale view).
func (c *Cluster) WaitNewerView(ctx context.Context, stale ring.ViewID) error {
	if err := c.waitFor(ctx, func(p *published) bool { return stale.Less(p.view.ID()) }); err != nil {
		return fmt.Errorf("view still at epoch %d change %d: %w", stale.Epoch, stale.Change, err)
	}
	return nil
}

// Change is a copy of the change in flight, nil when none is.
func (c *Cluster) Change() *Change { return c.fsm.load().change.clone() }

// LastChange is a copy of the last change that left flight (committed or aborted), nil if none.
func (c *Cluster) LastChange() *Change { return c.fsm.load().last.clone() }

// Watch returns a channel closed at the next change of View, Change or LastChange. Take the
// channel before reading the state it guards:
//
//	for { ch := c.Watch(); use(c.View()); select { case <-ch: case <-ctx.Done(): return } }
func (c *Cluster) Watch() <-chan struct{} { return c.fsm.watchCh() }

// Leader returns the raft leader's id and gRPC address, empty when none is known.
func (c *Cluster) Leader() (id, addr string) {
	a, i := c.raft.LeaderWithID()
	return string(i), string(a)
}

// Term is this node's current raft term: it grows by one at every election, so its growth
// counts leader changes and failed elections.
func (c *Cluster) Term() uint64 { return c.raft.CurrentTerm() }

// IsLeader reports whether this node is the raft leader.
func (c *Cluster) IsLeader() bool { return c.raft.State() == raft.Leader }

// Role is this node's raft role: leader, follower (a voter), non-voter, candidate or none.
func (c *Cluster) Role() kvpb.RaftRole {
	switch c.raft.State() {
	case raft.Leader:
		return kvpb.RaftRole_RAFT_ROLE_LEADER
	case raft.Candidate:
		return kvpb.RaftRole_RAFT_ROLE_CANDIDATE
	case raft.Shutdown:
		return kvpb.RaftRole_RAFT_ROLE_NONE
	}
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return kvpb.RaftRole_RAFT_ROLE_NONE
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(c.cfg.ID) {
			if s.Suffrage == raft.Voter {
				return kvpb.RaftRole_RAFT_ROLE_FOLLOWER
			}
			return kvpb.RaftRole_RAFT_ROLE_NONVOTER
		}
	}
	return kvpb.RaftRole_RAFT_ROLE_NONE
}

// Run performs the leader's duties while this node leads — journal the founders' ring, admit
// ring members to raft (voters up to MaxVoters, then non-voters) and remove departed ones, commit
// a change whose moves are all done — until ctx ends. Every node runs it; it is idle on followers.
func (c *Cluster) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.ReconcileInterval)
	defer t.Stop()
	leaderCh := c.raft.LeaderCh()
	for {
		watch := c.Watch()
		if c.IsLeader() {
			if err := c.reconcile(ctx); err != nil && ctx.Err() == nil {
				c.logger.Warn("leader duties", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-watch:
		case <-leaderCh:
		case <-t.C:
		}
	}
}

// Close stops raft and releases the node's raft state. Call it after Run has returned.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.closeAll() })
	return c.closeErr
}

func (c *Cluster) closeAll() error {
	var errs []error
	if c.raft != nil {
		if err := c.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
		}
	}
	if c.trans != nil {
		_ = c.trans.Close()
		c.trans.CloseStreams()
	}
	if c.layer != nil {
		c.layer.closeAll()
	}
	if c.clients != nil {
		c.clients.close()
	}
	for _, f := range slices.Backward(c.closers) {
		if err := f(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// peerClients caches one gRPC connection per peer address. Safe for concurrent use.
type peerClients struct {
	opts  []grpc.DialOption
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func newPeerClients(opts []grpc.DialOption) *peerClients {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return &peerClients{opts: opts, conns: map[string]*grpc.ClientConn{}}
}

func (p *peerClients) get(addr string) (kvpb.ClusterClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return nil, ErrClosed
	}
	cc, ok := p.conns[addr]
	if !ok {
		var err error
		cc, err = grpc.NewClient(addr, p.opts...)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		p.conns[addr] = cc
	}
	return kvpb.NewClusterClient(cc), nil
}

func (p *peerClients) close() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, cc := range conns {
		_ = cc.Close()
	}
}
