package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"ringkv/node/hlc"
	"ringkv/node/metrics"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/server"
	"ringkv/node/store"
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
	view    atomic.Pointer[ring.View]
	local   *replica.Local
	coord   *replica.Coordinator
	metrics *metrics.Registry

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
	logger = logger.With("node", cfg.ID)
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	secret, err := cfg.readSecret()
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, logger: logger, secret: secret, started: time.Now(),
		clock:   hlc.New(nil),
		conns:   map[string]*grpc.ClientConn{},
		remotes: map[string]*replica.Remote{},
	}
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

	if len(cfg.Peers) > 0 {
		r, err := founderRing(cfg)
		if err != nil {
			return nil, err
		}
		n.view.Store(&ring.View{Current: r})
	}

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

	n.local = replica.NewLocal(n.st, n.metrics)
	rcfg := replica.DefaultConfig()
	rcfg.ReplicaTimeout = cfg.ReplicaTimeout
	rcfg.MaxKeyBytes = server.MaxKeySize
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
	o = options{} // owned by n from here on

	n.grpcSrv, n.health = server.NewGRPC(server.GRPCConfig{
		Logger: logger, Secret: secret,
		Options: []grpc.ServerOption{grpc.MaxRecvMsgSize(int(max(cfg.MaxValueSize, 4<<20)) + 64<<10)},
	})
	data := server.Data{Coordinator: n.coord, View: n.View, MaxValueSize: cfg.MaxValueSize, Logger: logger}
	kvpb.RegisterKVServer(n.grpcSrv, server.NewKV(data))
	kvpb.RegisterReplicaServer(n.grpcSrv, server.NewReplica(server.ReplicaDeps{Local: n.local, Store: n.st, Clock: n.clock, View: n.View}))
	kvpb.RegisterAdminServer(n.grpcSrv, server.NewAdmin(server.AdminDeps{
		ID: cfg.ID, Info: n.nodeInfo, View: n.View, PeerAdmin: n.peerAdmin,
		PeerTimeout: 2 * time.Second, Stats: n.metrics, Profile: metrics.Capture,
	}))
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

// founderRing is the static ring founders compute from the same --peers list: epoch 1,
// deterministic balanced tokens.
func founderRing(cfg Config) (*ring.Ring, error) {
	ids := make([]string, len(cfg.Peers))
	for i, p := range cfg.Peers {
		ids[i] = p.ID
	}
	sort.Strings(ids)
	tokens := ring.FounderTokens(ids, cfg.VNodes)
	members := make([]ring.Member, len(cfg.Peers))
	for i, p := range cfg.Peers {
		members[i] = ring.Member{ID: p.ID, Addr: p.Addr, State: ring.StateUp, Weight: 1, Tokens: tokens[p.ID]}
	}
	r, err := ring.New(1, cfg.Replicas, members)
	if err != nil {
		return nil, fmt.Errorf("%w: --peers: %v", ErrInvalidConfig, err)
	}
	return r, nil
}

// View returns the ring view the node routes by; nil while it awaits admission.
func (n *Node) View() *ring.View { return n.view.Load() }

// SetView swaps the ring view atomically under traffic (the raft-held ring of issue 3
// calls it on every committed change).
func (n *Node) SetView(v *ring.View) {
	n.view.Store(v)
	n.setHealth()
}

func (n *Node) currentRing() *ring.Ring {
	if v := n.view.Load(); v != nil {
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

// ready is nil when the node serves client requests.
func (n *Node) ready() error {
	switch {
	case n.draining.Load():
		return errors.New("draining")
	case n.currentRing() == nil:
		return replica.ErrNotAdmitted
	}
	return nil
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
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Reconnect to a restarted peer within ~2s rather than gRPC's default backoff of up to 2m.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: time.Second,
		}),
	}
	if n.secret != "" {
		secret := n.secret
		opts = append(opts,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
				return invoker(metadata.AppendToOutgoingContext(ctx, server.SecretHeader, secret), method, req, reply, cc, o...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(metadata.AppendToOutgoingContext(ctx, server.SecretHeader, secret), desc, cc, method, o...)
			}))
	}
	c, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	n.conns[addr] = c
	return c, nil
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
	r = replica.NewRemote(c, n.epoch)
	n.remotes[m.Addr] = r
	return r
}

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
		UptimeSeconds: int64(time.Since(n.started).Seconds()), Version: Version, RaftRole: "none",
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
	a := n.Addrs()
	n.logger.Info("node serving", "grpc", a.GRPC, "http", a.HTTP, "admin", a.Admin, "epoch", n.epoch(), "data", n.cfg.DataDir)

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	n.logger.Info("node draining")
	n.draining.Store(true)
	n.setHealth()
	dctx, cancel := context.WithTimeout(context.Background(), n.cfg.DrainTimeout)
	defer cancel()
	var errs []error
	errs = append(errs, err)
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

func wrapServe(name string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return fmt.Errorf("%s server: %w", name, err)
}

// Start creates a node and runs it in the background until ctx ends or Close.
func Start(ctx context.Context, cfg Config, logger *slog.Logger, opts ...Option) (*Node, error) {
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
