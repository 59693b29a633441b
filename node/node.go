package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"ringkv/node/change"
	"ringkv/node/cluster"
	"ringkv/node/hlc"
	"ringkv/node/metrics"
	"ringkv/node/peers"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/server"
	"ringkv/node/store"
	"ringkv/node/stream"
	"ringkv/proto/kvpb"
)

// Version is reported in NodeInfo.
const Version = "0.1.0-dev"

// Addrs are the addresses a node listens on (resolved: port 0 becomes the bound port).
type Addrs struct {
	GRPC, HTTP, Admin string
}

// Option adjusts New.
type Option func(*options)

type options struct {
	grpc, http, admin net.Listener
}

// WithListeners makes the node serve on already bound listeners instead of binding its
// configured addresses (nil = bind the configured one). The node closes them. Useful to
// learn a founder's gRPC address before the --peers list is built.
func WithListeners(grpcLn, httpLn, adminLn net.Listener) Option {
	return func(o *options) { o.grpc, o.http, o.admin = grpcLn, httpLn, adminLn }
}

// Node is one running ringkv node. Create it with New (or Start), serve with Run.
type Node struct {
	cfg     Config
	logger  *slog.Logger
	secret  string
	started time.Time

	st      *store.Store
	clock   *hlc.Clock
	cl      *cluster.Cluster
	mover   *cluster.Mover
	local   *replica.Local
	coord   *replica.Coordinator
	metrics *metrics.Registry
	logs    *metrics.LogRing
	dial    []grpc.DialOption

	// Epoch catch-up (sawEpoch): the newest epoch seen from a peer, one waiter at a time.
	seenEpoch  atomic.Uint64
	catchingUp atomic.Bool
	bgCtx      context.Context
	bgCancel   context.CancelFunc
	// bgMu is held shared while a background goroutine is added to bg and exclusively while
	// bgCtx is cancelled: no bg.Go can race with the bg.Wait of the shutdown.
	bgMu sync.RWMutex
	bg   sync.WaitGroup

	connsMu sync.Mutex
	conns   map[string]*grpc.ClientConn
	remotes map[string]*replica.Remote

	grpcSrv  *grpc.Server
	health   *health.Server
	httpSrv  *http.Server
	adminSrv *http.Server
	lnGRPC   net.Listener
	lnHTTP   net.Listener
	lnAdmin  net.Listener
	draining atomic.Bool
	drainc   chan struct{} // closed when draining starts

	// Start/Close.
	stop   context.CancelFunc
	done   chan struct{}
	runErr error
}

// New opens the node's store, builds its ring from cfg.Peers (a static founders' ring at
// epoch 1) and binds its listeners; Run serves. logger nil = slog.Default().
func New(cfg Config, logger *slog.Logger, opts ...Option) (_ *Node, err error) {
	cfg, err = cfg.complete()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	logs := metrics.NewLogRing(logger.Handler(), logLines, slog.LevelInfo)
	logger = slog.New(logs).With("node", cfg.ID)
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	secret, err := cfg.readSecret()
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, logger: logger, logs: logs, secret: secret, started: time.Now(),
		clock:   hlc.New(nil),
		drainc:  make(chan struct{}),
		conns:   map[string]*grpc.ClientConn{},
		remotes: map[string]*replica.Remote{},
	}
	n.dial = dialOptions(secret, msgLimit(cfg))
	n.bgCtx, n.bgCancel = context.WithCancel(context.Background())
	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
			for _, l := range []net.Listener{o.grpc, o.http, o.admin} {
				if l != nil {
					l.Close()
				}
			}
		}
	}()

	scfg := store.DefaultConfig()
	scfg.Dir, scfg.InMemory, scfg.SyncWrites, scfg.Logger = cfg.DataDir, cfg.InMemory, cfg.SyncWrites, logger
	n.st, err = store.Open(scfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	closers = append(closers, n.st.Close)

	mcfg := metrics.DefaultConfig()
	mcfg.ID, mcfg.Ring, mcfg.Store = cfg.ID, n.currentRing, n.st
	mcfg.Breakers = func() []replica.Breaker { return n.coord.Breakers() }
	n.metrics = metrics.New(mcfg)

	n.local = replica.NewLocal(n.st, n.metrics, replica.LocalView(cfg.ID, n.View, func(ctx context.Context, vid ring.ViewID) error {
		return n.cl.WaitView(ctx, vid)
	}))
	rcfg := replica.DefaultConfig()
	rcfg.CatchUp = func(ctx context.Context, stale ring.ViewID) error { return n.cl.WaitNewerView(ctx, stale) }
	rcfg.ReplicaTimeout = cfg.ReplicaTimeout
	rcfg.MaxValueBytes = int(cfg.MaxValueSize)
	n.coord = replica.New(rcfg, cfg.ID, n.View, n.local, n.peer, n.clock, n.metrics)
	closers = append(closers, n.coord.Close)

	if n.lnGRPC, err = listen(o.grpc, cfg.GRPCAddr, "--grpc"); err != nil {
		return nil, err
	}
	closers = append(closers, n.lnGRPC.Close)
	if n.lnHTTP, err = listen(o.http, cfg.HTTPAddr, "--http"); err != nil {
		return nil, err
	}
	closers = append(closers, n.lnHTTP.Close)
	if n.lnAdmin, err = listen(o.admin, cfg.AdminAddr, "--admin"); err != nil {
		return nil, err
	}
	closers = append(closers, n.lnAdmin.Close)
	o = options{} // owned by n from here on

	n.cl, err = cluster.New(n.clusterConfig())
	if err != nil {
		return nil, fmt.Errorf("cluster metadata: %w", err)
	}
	closers = append(closers, n.cl.Close)
	rangeClient := &stream.RangeClient{
		Conn: func(addr string) (grpc.ClientConnInterface, error) { return n.conn(addr) },
		View: func() ring.ViewID { return n.View().ID() },
		Rate: func() uint64 {
			if ch := n.cl.Change(); ch != nil {
				return ch.RateBytes
			}
			return 0
		},
	}
	if cfg.MoveLatencyTarget > 0 {
		rangeClient.LatencyTarget = cfg.MoveLatencyTarget
		rangeClient.Latency = n.recentLatency
	}
	mvcfg := cluster.DefaultMoverConfig()
	mvcfg.Logger = logger
	if cfg.MoveRetryInterval > 0 {
		mvcfg.RetryInterval = cfg.MoveRetryInterval
	}
	if n.mover, err = cluster.NewMover(n.cl, rangeClient, n.st, mvcfg); err != nil {
		return nil, fmt.Errorf("mover: %w", err)
	}

	n.grpcSrv, n.health = server.NewGRPC(server.GRPCConfig{
		Logger: logger, Secret: secret,
		// WaitForHandlers: Stop (after DrainTimeout) waits for handlers to return, so none
		// runs against the store once it is closed.
		Options: []grpc.ServerOption{grpc.MaxRecvMsgSize(msgLimit(cfg)), grpc.MaxSendMsgSize(msgLimit(cfg)), grpc.WaitForHandlers(true)},
	})
	data := server.Data{Coordinator: n.coord, View: n.View, Ready: n.ready, MaxValueSize: cfg.MaxValueSize, Logger: logger}
	kvpb.RegisterKVServer(n.grpcSrv, server.NewKV(data))
	rdeps := server.ReplicaDeps{
		Local: n.local, Store: n.st, Clock: n.clock, View: n.View, OnEpoch: n.sawEpoch, Observer: n.metrics, Fence: n.local.Fence,
	}
	if cfg.MoveLatencyTarget > 0 {
		// The ranges this node serves as a source back off by its own latency too: its
		// clients are the ones a stream it sends slows down.
		rdeps.Latency, rdeps.LatencyTarget, rdeps.Rate = n.recentLatency, cfg.MoveLatencyTarget, rangeClient.Rate
	}
	kvpb.RegisterReplicaServer(n.grpcSrv, server.NewReplica(rdeps))
	pr := peers.Peers{Self: cfg.ID, Dial: peerDialer{n}, Timeout: peers.DefaultTimeout}
	changes := change.New(change.Config{
		Cluster: n.cl, View: n.View, Peers: pr, Info: n.nodeInfo, Stats: n.metrics,
		Counter: n.st, Mover: n.mover, DefaultRate: cfg.ChangeRate,
	})
	kvpb.RegisterAdminServer(n.grpcSrv, server.NewAdmin(server.AdminDeps{
		Node: describer{n}, View: n.View, Peers: pr, Stats: n.metrics, Profiler: server.ProfilerFunc(metrics.Capture),
		Logs: n.logs, Changes: changes, Draining: n.drainc,
	}))
	n.cl.Register(n.grpcSrv)
	n.httpSrv = &http.Server{Handler: server.NewHTTP(data), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	n.adminSrv = &http.Server{Handler: metrics.AdminHandler(n.metrics, n.ready), ReadHeaderTimeout: 10 * time.Second}
	n.setHealth()
	return n, nil
}

func listen(ln net.Listener, addr, flag string) (net.Listener, error) {
	if ln != nil {
		return ln, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	return l, nil
}

// raftAddr is the address other members dial this node at: its --peers entry, else --grpc,
// else (port 0) the bound address.
func raftAddr(cfg Config, bound string) string {
	for _, p := range cfg.Peers {
		if p.ID == cfg.ID {
			return p.Addr
		}
	}
	if _, port, err := net.SplitHostPort(cfg.GRPCAddr); err == nil && port != "0" {
		return cfg.GRPCAddr
	}
	return bound
}

// logLines is how many log lines the node keeps for Admin.LogTail.
const logLines = 1000

// clusterConfig is the node's member of the metadata group: raft under <data>/raft (in
// memory for --in-memory nodes), over the node's gRPC port, dialing peers with the secret.
func (n *Node) clusterConfig() cluster.Config {
	cfg := n.cfg
	cc := cluster.DefaultConfig()
	cc.ID, cc.GRPCAddr, cc.InMemory = cfg.ID, raftAddr(cfg, n.lnGRPC.Addr().String()), cfg.InMemory
	if !cfg.InMemory {
		cc.Dir = filepath.Join(cfg.DataDir, "raft")
	}
	for _, p := range cfg.Peers {
		cc.Peers = append(cc.Peers, cluster.Peer{ID: p.ID, Addr: p.Addr})
	}
	cc.Replicas, cc.Vnodes = cfg.Replicas, cfg.VNodes
	cc.DialOptions = n.dial
	if cfg.RaftHeartbeatTimeout > 0 {
		cc.HeartbeatTimeout = cfg.RaftHeartbeatTimeout
		cc.LeaderLeaseTimeout = cfg.RaftHeartbeatTimeout / 2
	}
	if cfg.RaftElectionTimeout > 0 {
		cc.ElectionTimeout = cfg.RaftElectionTimeout
	}
	if cfg.RaftReconcileInterval > 0 {
		cc.ReconcileInterval = cfg.RaftReconcileInterval
	}
	cc.Logger = n.logger
	return cc
}

// View returns the ring view the node routes by (the raft-held ring, lock-free): Current,
// plus Next while a change is in flight; nil while the node awaits admission.
func (n *Node) View() *ring.View {
	if n.cl == nil {
		return nil
	}
	return n.cl.View()
}

// Cluster returns the node's member of the metadata group.
func (n *Node) Cluster() *cluster.Cluster { return n.cl }

// recentSamples is how many requests of a role the last second must hold for its p99 to
// count in recentLatency (a p99 of a handful is their maximum).
const recentSamples = 20

// recentLatency is the p99 over about the last second of this node's requests, client-facing
// (coordinator) or as a replica, whichever is higher: what the pace of the ranges it pulls
// and of those it serves holds to its MoveLatencyTarget.
func (n *Node) recentLatency() time.Duration {
	var worst time.Duration
	for _, role := range []string{replica.RoleCoordinator, "replica"} {
		if p, count := n.metrics.RecentP99(role); count >= recentSamples {
			worst = max(worst, p)
		}
	}
	return worst
}

// Mover returns the node's mover (its part of ring changes).
func (n *Node) Mover() *cluster.Mover { return n.mover }

func (n *Node) currentRing() *ring.Ring {
	if v := n.View(); v != nil {
		return v.Current
	}
	return nil
}

func (n *Node) epoch() uint64 {
	if r := n.currentRing(); r != nil {
		return r.Epoch()
	}
	return 0
}

// ready is nil when the node serves client requests: it is not draining and a committed
// ring contains it.
func (n *Node) ready() error {
	if n.draining.Load() {
		return errors.New("draining")
	}
	r := n.currentRing()
	if r == nil {
		return replica.ErrNotAdmitted
	}
	if _, ok := r.Member(n.cfg.ID); !ok {
		return fmt.Errorf("%w: not a member of the ring at epoch %d", replica.ErrNotAdmitted, r.Epoch())
	}
	return nil
}

// epochWait bounds one catch-up wait for a newer epoch.
const epochWait = 10 * time.Second

// sawEpoch is told the ring epoch of every peer request and response. When a peer is ahead,
// one background waiter (bounded by epochWait) lets raft bring this node's ring up to it.
func (n *Node) sawEpoch(e uint64) {
	if e <= n.cl.Epoch() {
		return
	}
	for {
		cur := n.seenEpoch.Load()
		if e <= cur || n.seenEpoch.CompareAndSwap(cur, e) {
			break
		}
	}
	n.bgMu.RLock()
	defer n.bgMu.RUnlock()
	if n.bgCtx.Err() != nil || !n.catchingUp.CompareAndSwap(false, true) {
		return
	}
	n.bg.Go(func() {
		defer n.catchingUp.Store(false)
		target := n.seenEpoch.Load()
		ctx, cancel := context.WithTimeout(n.bgCtx, epochWait)
		defer cancel()
		if err := n.cl.WaitEpoch(ctx, target); err != nil && n.bgCtx.Err() == nil {
			n.logger.Warn("behind the cluster's ring epoch", "epoch", n.cl.Epoch(), "seen", target, "err", err)
		}
	})
}

func (n *Node) setHealth() {
	if n.health == nil {
		return
	}
	st := healthpb.HealthCheckResponse_SERVING
	if n.ready() != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	n.health.SetServingStatus("", st)
	n.health.SetServingStatus("ringkv.KV", st)
}

// conn returns the shared client connection to a peer, with the cluster secret attached.
func (n *Node) conn(addr string) (*grpc.ClientConn, error) {
	n.connsMu.Lock()
	defer n.connsMu.Unlock()
	if c, ok := n.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, n.dial...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	n.conns[addr] = c
	return c, nil
}

// dialOptions are the options of every connection to a peer: reconnect within ~2s, and the
// cluster secret on every call when one is configured.
// msgLimit is the largest gRPC message a node sends or receives: a value at the limit plus room
// for the key and the envelope. Peers' client side uses it too, or a Replica.Read or a
// StreamRange chunk of a large value would fail at gRPC's default 4 MiB.
func msgLimit(cfg Config) int { return int(max(cfg.MaxValueSize, 4<<20)) + 64<<10 }

func dialOptions(secret string, limit int) []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limit), grpc.MaxCallSendMsgSize(limit)),
		// Reconnect to a restarted peer within ~2s rather than gRPC's default backoff of up to 2m.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: time.Second,
		}),
	}
	if secret != "" {
		opts = append(opts,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
				return invoker(metadata.AppendToOutgoingContext(ctx, server.SecretHeader, secret), method, req, reply, cc, o...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(metadata.AppendToOutgoingContext(ctx, server.SecretHeader, secret), desc, cc, method, o...)
			}))
	}
	return opts
}

// peer is the coordinator's Replica for another member (nil when it cannot be dialed).
func (n *Node) peer(m ring.Member) replica.Replica {
	n.connsMu.Lock()
	r, ok := n.remotes[m.Addr]
	n.connsMu.Unlock()
	if ok {
		return r
	}
	c, err := n.conn(m.Addr)
	if err != nil {
		n.logger.Warn("dial peer", "peer", m.ID, "err", err)
		return nil
	}
	n.connsMu.Lock()
	defer n.connsMu.Unlock()
	if r, ok := n.remotes[m.Addr]; ok {
		return r
	}
	r = replica.NewRemote(c, n.epoch, replica.OnEpoch(n.sawEpoch))
	n.remotes[m.Addr] = r
	return r
}

// peerDialer is the node's connections as a peers.Dialer.
type peerDialer struct{ n *Node }

func (d peerDialer) Admin(addr string) (kvpb.AdminClient, error) { return d.n.peerAdmin(addr) }

// describer is the node as a server.Describer.
type describer struct{ n *Node }

func (d describer) NodeInfo(ctx context.Context) *kvpb.NodeInfoResponse { return d.n.nodeInfo(ctx) }

func (n *Node) peerAdmin(addr string) (kvpb.AdminClient, error) {
	c, err := n.conn(addr)
	if err != nil {
		return nil, err
	}
	return kvpb.NewAdminClient(c), nil
}

// nodeInfo describes this node for Admin.NodeInfo and Status.
func (n *Node) nodeInfo(context.Context) *kvpb.NodeInfoResponse {
	a := n.Addrs()
	lsm, vlog := n.st.Size()
	info := &kvpb.NodeInfoResponse{
		Id: n.cfg.ID, GrpcAddr: a.GRPC, HttpAddr: a.HTTP, AdminAddr: a.Admin,
		Epoch: n.epoch(), Keys: uint64(max(n.st.KeyCount(), 0)), DiskBytes: uint64(max(lsm+vlog, 0)),
		UptimeSeconds: int64(time.Since(n.started).Seconds()), Version: Version, RaftRole: n.cl.Role(),
		FreeDiskBytes: freeDisk(n.cfg.DataDir),
	}
	if s := n.metrics.Snapshot(false); s != nil {
		info.OpsPerSec, info.P99Ms = s.GetOpsPerSec(), s.GetP99Ms()
	}
	for _, b := range n.coord.Breakers() {
		info.Breakers = append(info.Breakers, &kvpb.BreakerState{Peer: b.Peer, State: string(b.State), ConsecutiveFailures: uint64(b.ConsecutiveFailures)})
	}
	return info
}

// Addrs returns the bound addresses.
func (n *Node) Addrs() Addrs {
	return Addrs{GRPC: n.lnGRPC.Addr().String(), HTTP: n.lnHTTP.Addr().String(), Admin: n.lnAdmin.Addr().String()}
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// Config returns the node's config with its derived defaults filled in.
func (n *Node) Config() Config { return n.cfg }

// Store returns the node's store (for tests and tools that inspect copies).
func (n *Node) Store() *store.Store { return n.st }

// Run serves until ctx ends or a server fails, then drains: it stops accepting, lets
// in-flight requests finish (up to DrainTimeout), stops the coordinator and flushes and
// closes badger. It returns nil after a clean shutdown.
func (n *Node) Run(ctx context.Context) error {
	errc := make(chan error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { errc <- wrapServe("grpc", n.grpcSrv.Serve(n.lnGRPC)) })
	wg.Go(func() { errc <- wrapServe("http", n.httpSrv.Serve(n.lnHTTP)) })
	wg.Go(func() { errc <- wrapServe("admin", n.adminSrv.Serve(n.lnAdmin)) })
	mctx, mcancel := context.WithCancel(context.Background())
	wg.Go(func() { n.metrics.Run(mctx) })
	// The metadata group and this node's part of ring changes stop before the servers drain:
	// raft's streams run through the gRPC server.
	var cwg sync.WaitGroup
	cctx, ccancel := context.WithCancel(context.Background())
	cwg.Go(func() {
		if err := n.cl.Run(cctx); err != nil {
			n.logger.Warn("cluster metadata", "err", err)
		}
	})
	cwg.Go(func() {
		if err := n.mover.Run(cctx); err != nil {
			n.logger.Warn("mover", "err", err)
		}
	})
	cwg.Go(func() { n.watchRing(cctx) })
	a := n.Addrs()
	n.logger.Info("node serving", "grpc", a.GRPC, "http", a.HTTP, "admin", a.Admin, "epoch", n.epoch(), "data", n.cfg.DataDir)
	if n.secret != "" {
		n.logger.Info("cluster secret configured: internal and admin RPCs require it")
	} else {
		n.logger.Warn("no cluster secret configured: admin RPCs are accepted from loopback only, internal RPCs from anyone")
	}
	if n.View() == nil {
		n.logger.Info("awaiting admission: add this node with kvctl ring add " + n.cfg.ID + "=" + a.GRPC)
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	n.logger.Info("node draining")
	n.draining.Store(true)
	close(n.drainc)
	n.setHealth()
	ccancel()
	cwg.Wait()
	n.bgMu.Lock()
	n.bgCancel()
	n.bgMu.Unlock()
	n.bg.Wait()
	var errs []error
	errs = append(errs, err)
	if e := n.cl.Close(); e != nil {
		errs = append(errs, fmt.Errorf("close cluster: %w", e))
	}
	dctx, cancel := context.WithTimeout(context.Background(), n.cfg.DrainTimeout)
	defer cancel()
	if e := n.httpSrv.Shutdown(dctx); e != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", e))
	}
	stopped := make(chan struct{})
	go func() { n.grpcSrv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-dctx.Done():
		n.grpcSrv.Stop()
		<-stopped
	}
	if e := n.adminSrv.Shutdown(dctx); e != nil {
		errs = append(errs, fmt.Errorf("admin shutdown: %w", e))
	}
	mcancel()
	wg.Wait()
	errs = append(errs, n.coord.Close())
	n.connsMu.Lock()
	for _, c := range n.conns {
		c.Close()
	}
	n.conns, n.remotes = map[string]*grpc.ClientConn{}, map[string]*replica.Remote{}
	n.connsMu.Unlock()
	if e := n.st.Close(); e != nil {
		errs = append(errs, fmt.Errorf("close store: %w", e))
	}
	n.logger.Info("node stopped")
	return errors.Join(errs...)
}

// watchRing keeps the health service in step with the ring (admission, removal) and logs
// epoch changes, until ctx ends.
func (n *Node) watchRing(ctx context.Context) {
	var last uint64
	for {
		ch := n.cl.Watch()
		n.setHealth()
		if e := n.epoch(); e != last {
			if last != 0 || e > 1 {
				n.logger.Info("ring epoch", "epoch", e)
			}
			last = e
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// freeDisk is the free space of the file system holding dir (0 when unknown or in memory).
func freeDisk(dir string) uint64 {
	if dir == "" {
		return 0
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return st.Bavail * uint64(st.Bsize)
}

func wrapServe(name string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return fmt.Errorf("%s server: %w", name, err)
}

// Start creates a node and runs it in the background until ctx ends or Close.
func Start(ctx context.Context, cfg Config, logger *slog.Logger, opts ...Option) (*Node, error) {
	metrics.KeepMutexWaitsTimed() // as Main does
	n, err := New(cfg, logger, opts...)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	n.stop, n.done = cancel, make(chan struct{})
	go func() {
		defer close(n.done)
		n.runErr = n.Run(rctx)
	}()
	return n, nil
}

// Close stops a node started with Start and waits until it has drained and closed its store.
func (n *Node) Close() error {
	if n.stop == nil {
		return errors.New("close: node not started with Start")
	}
	n.stop()
	<-n.done
	return n.runErr
}
