package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"ringkv/internal/version"
	"ringkv/node/admin"
	"ringkv/node/change"
	"ringkv/node/cluster"
	"ringkv/node/heat"
	"ringkv/node/hints"
	"ringkv/node/hlc"
	"ringkv/node/hotkeys"
	"ringkv/node/latency"
	"ringkv/node/metrics"
	"ringkv/node/peers"
	"ringkv/node/repair"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/server"
	"ringkv/node/store"
	"ringkv/node/stream"
	"ringkv/node/tcpinfo"
	"ringkv/proto/kvpb"
)

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

// Node is one running ringkv node. Create it with New (or Start), serve with Run. node.go
// wires it; conns.go holds its connections to peers, epoch.go its readiness and catch-up
// with the cluster's ring, run.go its serving and drain.
type Node struct {
	cfg Config
	// baseline is this node's latency over the last seconds, sampled by Run: the "p99
	// before" of a ring change's pace.
	baseline stream.Baseline
	// schedWait is the p99 of the process's goroutines' wait to run over the last
	// stream.AdaptWindow: the CPU pressure a ring change's pace reads beside the latency.
	schedWait *metrics.SchedWait
	logger    *slog.Logger
	secret    string
	tls       bool // --certs-dir: mutual TLS on every port
	started   time.Time

	st      *store.Store
	clock   *hlc.Clock
	offsets *hlc.Monitor // this node's clock offset to each peer
	cl      *cluster.Cluster
	mover   *cluster.Mover
	changes *change.Service // plans ring changes; samples the load they are observed by
	local   *replica.Local
	coord   *replica.Coordinator
	hints   *hints.Log
	repairs *repair.Service // repair sessions this node coordinates (and background repair)
	repairR *repair.Replica // this node's side of repair
	metrics *metrics.Registry
	stats   *metrics.Stats   // metrics with the coordinator's breakers: what Admin and /metrics serve
	hot     *hotkeys.Summary // the on-call view: hottest keys coordinated
	heat    *heat.History    // the on-call view: load per token bucket over time
	lat     *latency.Tracker // the on-call view: latency per vnode and per peer replica
	logs    *metrics.LogRing
	dial    []grpc.DialOption
	tcp     *tcpinfo.Tracker // counts the TCP segments to each peer and their retransmits

	// Epoch catch-up (sawEpoch): the newest epoch seen from a peer, one waiter at a time.
	seenEpoch  atomic.Uint64
	catchingUp atomic.Bool
	bgCtx      context.Context
	bgCancel   context.CancelFunc
	// bgMu is held shared while a background goroutine is added to bg and exclusively while
	// bgCtx is cancelled: no bg.Go can race with the bg.Wait of the shutdown.
	bgMu sync.RWMutex
	bg   sync.WaitGroup

	clockWarnMu sync.Mutex
	clockWarned map[string]time.Time // by peer: when its clock offset was last logged

	connsMu sync.Mutex
	conns   map[string]*grpc.ClientConn
	remotes map[string]*replica.Remote
	batches replica.BatchCounts // of every Remote in remotes

	grpcSrv  *grpc.Server
	health   *health.Server
	httpSrv  *fasthttp.Server
	adminSrv *http.Server
	lnGRPC   net.Listener
	lnHTTP   net.Listener
	lnAdmin  net.Listener
	draining atomic.Bool
	warm     atomic.Bool   // connected has found every peer tried once
	members  *memberIPs    // who internal RPCs are accepted from without a secret or TLS
	drainc   chan struct{} // closed when draining starts
	stopping chan struct{} // closed when the gRPC server begins its graceful stop

	// Start/Close.
	stop   context.CancelFunc
	done   chan struct{}
	runErr error
}

// New opens the node's store, builds its ring from cfg.Peers (a static founders' ring at
// epoch 1) and binds its listeners; Run serves. logger nil = slog.Default().
//
// It builds in dependency order, each part from those before it: listeners, the metadata
// group (cluster), the store and metrics, the local replica and the coordinator, the
// range-stream client and the mover, the ring-change domain, then the servers. No part is
// handed a function that reads one built later.
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
		clock:       hlc.New(nil, hlc.MaxOffset(cfg.MaxClockOffset)),
		offsets:     hlc.NewMonitor(cfg.MaxClockOffset, nil),
		clockWarned: map[string]time.Time{},
		drainc:      make(chan struct{}),
		stopping:    make(chan struct{}),
		schedWait:   metrics.NewSchedWait(stream.AdaptWindow),
		conns:       map[string]*grpc.ClientConn{},
		remotes:     map[string]*replica.Remote{},
	}
	n.members = &memberIPs{n: n}
	tlsc, err := loadTLS(cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("--certs-dir: %w", err)
	}
	n.tls = tlsc != nil
	n.tcp = tcpinfo.New()
	n.dial = append(dialOptions(secret, msgLimit(cfg), tlsc.peerCreds()), grpc.WithContextDialer(n.tcp.Dial))
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

	// Listeners: the metadata group's address may be the bound gRPC port.
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
	// A flood of connections is bounded: each port holds at most maxConnections (HTTP makes
	// room by closing its oldest idle one; a plaintext one is told 503), and slow or idle
	// HTTP clients are timed out. The limit counts raw connections, under TLS: the HTTPS
	// listener must see the raw connection to answer plaintext with a 400.
	httpLimit, grpcLimit := server.NewConnLimit(cfg.maxConnections()), server.NewConnLimit(cfg.maxConnections())
	if tlsc == nil {
		httpLimit.Refuse = server.RefuseHTTP
	}
	n.lnHTTP, n.lnGRPC = httpLimit.Listener(n.lnHTTP), grpcLimit.Listener(n.lnGRPC)
	n.lnHTTP, n.lnAdmin = tlsc.clientListener(n.lnHTTP), tlsc.listener(n.lnAdmin)
	o = options{} // owned by n from here on

	// The metadata group: the ring every other part routes by.
	if n.cl, err = cluster.New(n.clusterConfig()); err != nil {
		return nil, fmt.Errorf("cluster metadata: %w", err)
	}
	closers = append(closers, n.cl.Close)

	scfg := store.DefaultConfig()
	scfg.Dir, scfg.InMemory, scfg.SyncWrites, scfg.Logger = cfg.DataDir, cfg.InMemory, cfg.SyncWrites, logger
	scfg.MinFreeDisk, scfg.Recover = cfg.MinFreeDisk, cfg.Recover
	scfg.StampBytes, scfg.ValueThreshold = cfg.StampCache, cfg.ValueThreshold
	if n.st, err = store.Open(scfg); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	closers = append(closers, n.st.Close)
	// Hints in a badger of their own under the data directory (hints.Log says why), closed
	// after the coordinator that writes them.
	if n.hints, err = hints.Open(hints.Config{
		Dir: hints.Path(cfg.DataDir), InMemory: cfg.InMemory, SyncWrites: cfg.SyncWrites,
		MaxBytes: cfg.MaxHintBytes, MaxAge: cfg.MaxHintWindow, Writable: n.st.DiskFull, Logger: logger,
		Badger: n.st.FitBadger,
	}); err != nil {
		return nil, fmt.Errorf("open hints: %w", err)
	}
	closers = append(closers, n.hints.Close)

	mcfg := metrics.DefaultConfig()
	mcfg.ID, mcfg.Ring, mcfg.Store = cfg.ID, n.currentRing, n.st
	if cfg.LoadWindow > 0 {
		mcfg.LoadWindow = cfg.LoadWindow
	}
	mcfg.ClockRejected = n.clock.Rejected
	mcfg.Batches = n.batches.Load
	mcfg.Hints = n.hints.Queues
	mcfg.ClockOffsets = func() map[string]time.Duration {
		out := map[string]time.Duration{}
		for peer, o := range n.offsets.Offsets() {
			out[peer] = o.Offset
		}
		return out
	}
	if err := mcfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: metrics: %w", ErrInvalidConfig, err)
	}
	n.metrics = metrics.New(mcfg)
	n.openOnCall(cfg)

	// The data path: this node's replica, then the coordinator over it and the peers.
	n.local = replica.NewLocal(n.st, n.metrics, replica.LocalView(cfg.ID, n.cl.View, n.cl.WaitView),
		// The coordinator is built below, before any write can come in.
		replica.LocalTimed(func(d time.Duration, err error) { n.coord.ObserveStoreWrite(d, err) }))
	rcfg := replica.DefaultConfig()
	rcfg.CatchUp = n.cl.WaitNewerView
	rcfg.ReplicaTimeout = cfg.ReplicaTimeout
	rcfg.Logger = logger
	rcfg.ClockCheck = n.offsets.Check
	rcfg.MaxValueBytes = int(cfg.MaxValueSize)
	rcfg.Writable = n.st.DiskFull
	rcfg.Hints = n.hints
	rcfg.Keys = keyObserver{hot: n.hot, heat: n.heat, lat: n.lat, view: n.cl.View}
	rcfg.Calls = n.lat
	rcfg.LinkCounts = func(addr string) (uint64, uint64) {
		c := n.tcp.Counts(addr)
		return c.Segments, c.Retransmits
	}
	rcfg.ClientCounts = func() (uint64, uint64) {
		c := n.tcp.Counts(clientsKey)
		return c.Segments, c.Retransmits
	}
	rcfg.HintRate = int64(min(cfg.HintRate, 1<<62))
	if cfg.HintRate == 0 {
		rcfg.HintRate = -1 // unpaced
	}
	if err := rcfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: replica: %w", ErrInvalidConfig, err)
	}
	n.coord = replica.New(rcfg, cfg.ID, n.cl.View, n.local, n.peer, n.clock, n.metrics)
	closers = append(closers, n.coord.Close)
	// The coordinator observes into the registry: what the node serves of its numbers joins
	// the two, built after both.
	n.stats = metrics.NewStats(n.metrics, n.coord.Breakers)

	// This node's part of ring changes: the range-stream client and the mover.
	rangeClient := &stream.RangeClient{
		Conn: func(addr string) (grpc.ClientConnInterface, error) { return n.conn(addr) },
		View: func() ring.ViewID { return n.cl.View().ID() },
		Rate: n.changeRate,
	}
	if cfg.MoveLatencyTarget != MovePaceOff {
		rangeClient.LatencyTarget = cfg.MoveLatencyTarget
		rangeClient.Latency, rangeClient.CPUWait = n.paceLatency, n.schedWait.P99
		rangeClient.Baseline = n.baseline.Median
	}
	mvcfg := cluster.DefaultMoverConfig()
	mvcfg.Logger = logger
	if cfg.MoveRetryInterval > 0 {
		mvcfg.RetryInterval = cfg.MoveRetryInterval
	}
	mvcfg.StallAfter = cfg.MoveStallAfter
	if cfg.MoveCheckpointBytes > 0 {
		mvcfg.CheckpointBytes = cfg.MoveCheckpointBytes
	}
	if cfg.MoveCheckpointInterval > 0 {
		mvcfg.CheckpointInterval = cfg.MoveCheckpointInterval
	}
	if n.mover, err = cluster.NewMover(n.cl, rangeClient, n.st, mvcfg); err != nil {
		return nil, fmt.Errorf("mover: %w", err)
	}
	// Repair: this node's side (trees, pulls from other replicas with a range client of its
	// own, so its byte budget is repair's alone) and the sessions it coordinates.
	stateDir := cfg.DataDir
	if cfg.InMemory {
		stateDir = ""
	}
	rstate, err := repair.OpenState(stateDir)
	if err != nil {
		return nil, err
	}
	n.repairR = repair.NewReplica(repair.ReplicaConfig{
		Store: n.st, State: rstate, Grace: cfg.TombstoneGrace, Now: cfg.Now, Logger: logger,
		// Tree walks back off by this node's latency, always: a walk hashes every record of
		// its ranges, and the clients it slows down are this node's.
		Latency: n.recentLatency, LatencyTarget: max(0, cfg.MoveLatencyTarget),
		Source: &stream.RangeClient{
			Conn: func(addr string) (grpc.ClientConnInterface, error) { return n.conn(addr) },
			View: func() ring.ViewID { return n.cl.View().ID() },
		},
	})
	n.repairs = repair.NewService(repair.Config{
		Self: cfg.ID, View: n.cl.View, Watch: n.cl.Watch, Dial: peerDialer{n}, DefaultRate: cfg.ChangeRate,
		Journal: n.cl, TakeoverAfter: cfg.RepairTakeoverAfter,
		Interval: cfg.RepairInterval, BackgroundRate: cfg.RepairRate, Now: cfg.Now, Logger: logger,
	})

	n.stats.Prometheus().MustRegister(gauges{n})
	n.stats.Prometheus().MustRegister(n.onCallGauges()...)

	pr := peers.Peers{Self: cfg.ID, Dial: peerDialer{n}, Timeout: peers.DefaultTimeout}
	// The pace of the ranges this node serves, one for all its streams (server.Replica's).
	sendPace := &stream.Adaptive{}
	changes := change.New(change.Config{
		Cluster: n.cl, View: n.cl.View, Peers: pr, Info: n.nodeInfo, Stats: n.stats,
		Counter: n.st, Mover: n.mover, DefaultRate: cfg.ChangeRate,
		PredictionDelay: cfg.PredictionDelay, PredictionWindow: cfg.PredictionWindow,
		Paces: func() []*kvpb.Pace { return paces(cfg.ID, rangeClient.Pace(), sendPace.State(), time.Now()) },
	})

	// The servers, last: every service they register is built.
	n.grpcSrv, n.health = server.NewGRPC(server.GRPCConfig{
		Logger: logger, Secret: secret, Creds: tlsc.serverCreds(logger), Member: n.members.allowed,
		// WaitForHandlers: Stop (after DrainTimeout) waits for handlers to return, so none
		// runs against the store once it is closed.
		Options: []grpc.ServerOption{grpc.MaxRecvMsgSize(msgLimit(cfg)), grpc.MaxSendMsgSize(msgLimit(cfg)), grpc.WaitForHandlers(true)},
	})
	data := server.Data{Coordinator: n.coord, View: n.cl.View, Ready: n.ready, MaxValueSize: cfg.MaxValueSize, Logger: logger}
	kvpb.RegisterKVServer(n.grpcSrv, server.NewKV(data))
	rdeps := server.ReplicaDeps{
		Local: n.local, Store: n.st, Clock: n.clock, View: n.cl.View, OnEpoch: n.sawEpoch, Observer: n.metrics, Fence: n.local.Fence,
		Repair:   n.repairR,
		Stopping: n.stopping,
		Links: func(theirs *kvpb.LinkView) *kvpb.LinkView {
			n.coord.CalledLinks(theirs)
			return n.coord.LinkView()
		},
	}
	if cfg.MoveLatencyTarget != MovePaceOff {
		// The ranges this node serves as a source back off by its own latency too: its
		// clients are the ones a stream it sends slows down.
		rdeps.Latency, rdeps.LatencyTarget, rdeps.Rate, rdeps.Pace = n.paceLatency, cfg.MoveLatencyTarget, n.changeRate, sendPace
		rdeps.CPUWait = n.schedWait.P99
		rdeps.Baseline = n.baseline.Median
	}
	kvpb.RegisterReplicaServer(n.grpcSrv, server.NewReplica(rdeps))
	n.changes = changes
	kvpb.RegisterAdminServer(n.grpcSrv, server.NewAdmin(server.AdminDeps{
		Node: describer{n}, View: n.cl.View, Peers: pr, Stats: n.stats, Profiler: server.ProfilerFunc(admin.Capture),
		Logs: n.logs, Changes: changes, Repairs: n.repairs, HotKeys: hotKeysDep(n.hot), Heat: n.heat, Latency: n.lat, Draining: n.drainc,
	}))
	n.cl.Register(n.grpcSrv)
	n.httpSrv = server.NewHTTPServer(data, server.HTTPConfig{
		ReadTimeout: cfg.HTTPReadTimeout, IdleTimeout: cfg.IdleTimeout, MaxHeaderBytes: maxClientHeaderBytes,
		ConnState: n.clientConnState(httpLimit.ConnState),
	})
	n.adminSrv = &http.Server{
		Handler:           admin.Handler(n.stats.Prometheus(), n.readyz),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: cfg.HTTPReadTimeout, IdleTimeout: cfg.IdleTimeout, MaxHeaderBytes: maxHeaderBytes,
	}
	n.setHealth()
	return n, nil
}

// clientsKey is the key of the client API's connections in the node's tcpinfo.Tracker.
const clientsKey = "clients"

// clientConnState has the node's tcpinfo.Tracker count the segments of the client API's
// connections (what clients' lost packets cost), then calls next.
func (n *Node) clientConnState(next func(net.Conn, http.ConnState)) func(net.Conn, http.ConnState) {
	return func(c net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			n.tcp.Track(clientsKey, c)
		case http.StateClosed, http.StateHijacked:
			n.tcp.Untrack(c)
		}
		next(c, s)
	}
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

// raftAddr is the address other members dial this node at: its --peers entry, else
// --advertise, else --grpc, else (port 0) the bound address.
func raftAddr(cfg Config, bound string) string {
	for _, p := range cfg.Peers {
		if p.ID == cfg.ID {
			return p.Addr
		}
	}
	if cfg.Advertise != "" {
		return cfg.Advertise
	}
	if _, port, err := net.SplitHostPort(cfg.GRPCAddr); err == nil && port != "0" {
		return cfg.GRPCAddr
	}
	return bound
}

// maxHeaderBytes bounds an HTTP request's header: room for a key at its limit,
// percent-encoded, and ordinary headers.
const maxHeaderBytes = 64 << 10

// maxClientHeaderBytes is maxHeaderBytes for the client API, whose server holds a buffer of
// that size for each open connection: a key at its limit percent-encoded is 3 KiB.
const maxClientHeaderBytes = 16 << 10

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
		// The whole heartbeat timeout (raft's ceiling), not half: with short timeouts a
		// leader stalled half of one (a GC, a busy machine) stepped down for nothing.
		cc.LeaderLeaseTimeout = cfg.RaftHeartbeatTimeout
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
func (n *Node) View() *ring.View { return n.cl.View() }

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
	for _, role := range []replica.Role{replica.RoleCoordinator, replica.RoleReplica} {
		if p, count := n.metrics.RecentP99(role); count >= recentSamples {
			worst = max(worst, p)
		}
	}
	return worst
}

// paceLatency is recentLatency over the last stream.AdaptWindow: what the pace of a ring
// change's streams decides on, once per window.
func (n *Node) paceLatency() time.Duration {
	var worst time.Duration
	for _, role := range []replica.Role{replica.RoleCoordinator, replica.RoleReplica} {
		if p, count := n.metrics.RecentP99Over(role, stream.AdaptWindow); count >= recentSamples {
			worst = max(worst, p)
		}
	}
	return worst
}

// changeRate is the streaming rate of the change in flight for this node (bytes per second;
// 0 = none): its own override, else the change's.
func (n *Node) changeRate() uint64 {
	if ch := n.cl.Change(); ch != nil {
		return ch.RateFor(n.cfg.ID)
	}
	return 0
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

// describer is the node as a server.Describer.
type describer struct{ n *Node }

func (d describer) NodeInfo(ctx context.Context) *kvpb.NodeInfoResponse { return d.n.nodeInfo(ctx) }

// nodeInfo describes this node for Admin.NodeInfo and Status.
func (n *Node) nodeInfo(context.Context) *kvpb.NodeInfoResponse {
	a := n.Addrs()
	lsm, vlog := n.st.Size()
	gray := n.coord.Gray()
	info := &kvpb.NodeInfoResponse{
		Id: n.cfg.ID, GrpcAddr: a.GRPC, HttpAddr: a.HTTP, AdminAddr: a.Admin,
		Epoch: n.epoch(), Keys: uint64(max(n.st.KeyCount(), 0)), DiskBytes: uint64(max(lsm+vlog, 0)),
		UptimeSeconds: int64(time.Since(n.started).Seconds()), Version: version.Get().Short(), RaftRole: n.cl.Role(),
		FreeDiskBytes: n.freeDisk(), Process: admin.Process(),
		Problems: n.problems(gray), Gray: gray,
	}
	if n.cfg.Advertise != "" {
		info.GrpcAddr = n.cfg.Advertise
	}
	if err := n.st.DiskFull(); err != nil {
		info.DiskFull = err.Error()
	}
	info.DataDamage = n.st.Damage()
	info.DamagedRanges = uint32(n.repairs.DamagedRanges(n.st))
	if s := n.metrics.Snapshot(false); s != nil {
		info.OpsPerSec, info.P99Ms = s.GetOpsPerSec(), s.GetP99Ms()
	}
	if t := n.repairR.LastRepaired(n.primaryRanges()); !t.IsZero() {
		info.LastRepairedUnix = t.Unix()
	}
	info.Repair = n.repairs.LocalProgress()
	for _, b := range n.coord.Breakers() {
		info.Breakers = append(info.Breakers, &kvpb.BreakerState{Peer: b.Peer, State: b.State.Proto(), ConsecutiveFailures: uint64(b.ConsecutiveFailures)})
	}
	for _, q := range n.hints.Queues() {
		if q.Count == 0 {
			continue
		}
		info.Hints = append(info.Hints, &kvpb.HintQueue{Peer: q.Peer, Hints: q.Count, Bytes: q.Bytes, OldestUnix: q.Oldest.Unix()})
	}
	info.HintsDropped = n.hints.Dropped()
	info.PeerLatency = n.lat.Peers()
	info.Links = n.coord.LinkView().GetLinks()
	return info
}

// primaryRanges are the token ranges this node is the primary replica of in the current ring.
func (n *Node) primaryRanges() []repair.Span {
	r := n.currentRing()
	if r == nil {
		return nil
	}
	var out []repair.Span
	for _, rg := range r.Ranges() {
		if rg.Owner == n.cfg.ID {
			out = append(out, repair.Span{Start: rg.Start, End: rg.End})
		}
	}
	return out
}

// Repairs returns the repair sessions this node coordinates.
func (n *Node) Repairs() *repair.Service { return n.repairs }

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

// freeDisk is the free space of the data volume (0 when unknown or in memory): as the store
// last measured it when it watches the volume, else measured now.
func (n *Node) freeDisk() uint64 {
	if free, total, _ := n.st.Disk(); total > 0 {
		return free
	}
	if n.cfg.InMemory || n.cfg.DataDir == "" {
		return 0
	}
	free, _, err := store.Volume(n.cfg.DataDir)
	if err != nil {
		return 0
	}
	return free
}
