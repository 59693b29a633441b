package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"

	"ringkv/node/admin"
	"ringkv/node/replica"
)

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
	// The latency before a ring change's streams, for their pace's auto target.
	wg.Go(func() { n.baseline.Run(mctx, time.Second, n.recentLatency) })
	wg.Go(func() {
		if err := n.heat.Run(mctx); err != nil {
			n.logger.Warn("heat history", "err", err)
		}
	})
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
	// The leader observes the load after each ring change, for its predicted vs observed.
	cwg.Go(func() { n.cl.Observe(cctx, n.changes) })
	cwg.Go(func() { n.watchRing(cctx) })
	cwg.Go(func() { n.watchEvents(cctx) })
	cwg.Go(func() {
		if err := n.repairs.Run(cctx); err != nil {
			n.logger.Warn("repair", "err", err)
		}
	})
	if len(n.st.DamagedSpans()) > 0 {
		// Started with --recover (now or before): repair the marked ranges from the peers.
		cwg.Go(func() { n.repairs.HealDamaged(cctx, n.st, n.ready) })
	}
	a := n.Addrs()
	n.logger.Info("node serving", "grpc", a.GRPC, "http", a.HTTP, "admin", a.Admin, "epoch", n.epoch(), "data", n.cfg.DataDir)
	switch {
	case n.secret != "":
		n.logger.Info("cluster secret configured: internal and admin RPCs require it")
	case n.tls:
		n.logger.Info("no cluster secret configured: a client certificate signed by the cluster CA authorizes internal and admin RPCs")
	default:
		n.logger.Warn("no cluster secret and no TLS configured: admin RPCs are accepted from loopback only, internal RPCs from ring members and loopback only")
	}
	if n.tls {
		n.logger.Info("mutual TLS on: gRPC requires a certificate signed by the cluster CA; HTTP and admin ports serve HTTPS", "certs", n.cfg.CertsDir)
	} else {
		n.logger.Warn("no --certs-dir: every port speaks plaintext; use kvctl cert and --certs-dir on a network others can reach")
	}
	if d := n.st.Damage(); d != "" {
		n.logger.Error("started on damaged data (--recover): its damaged ranges answer no reads until they are repaired from the peers", "damage", d)
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
	sw := watchStop(n.logger, n.cfg.DrainTimeout+stopStallGrace)
	defer sw.done()
	sw.at("background work: repairs, moves, ring watches")
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
	sw.at("cluster metadata (raft)")
	if e := n.cl.Close(); e != nil {
		errs = append(errs, fmt.Errorf("close cluster: %w", e))
	}
	dctx, cancel := context.WithTimeout(context.Background(), n.cfg.DrainTimeout)
	defer cancel()
	sw.at("HTTP requests in flight")
	if e := n.httpSrv.ShutdownWithContext(dctx); e != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", e))
	}
	sw.at("gRPC calls in flight")
	stopped := make(chan struct{})
	close(n.stopping) // Batch streams from peers end, or GracefulStop would wait for them
	go func() { n.grpcSrv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-dctx.Done():
		n.grpcSrv.Stop()
		<-stopped
	}
	sw.at("admin requests in flight")
	if e := n.adminSrv.Shutdown(dctx); e != nil {
		errs = append(errs, fmt.Errorf("admin shutdown: %w", e))
	}
	sw.at("servers and metrics loops")
	mcancel()
	wg.Wait()
	sw.at("coordinator")
	errs = append(errs, n.coord.Close())
	// Badger flushes its memtables into memory-mapped files at Close, the hints' first: on a
	// volume something else has filled, a look now frees the store's ballast for them, and
	// with no room even then the hints are left as after a crash (a flush into a mapped file
	// on a full volume is a SIGBUS); their write-ahead log is replayed at the next start.
	sw.at("hints store")
	if n.st.CheckDisk() {
		if e := n.hints.Close(); e != nil {
			errs = append(errs, fmt.Errorf("close hints: %w", e))
		}
	} else {
		n.logger.Warn("disk full at stop: the hints' memtable left unflushed in its write-ahead log, replayed at the next start")
	}
	n.connsMu.Lock()
	for _, r := range n.remotes {
		r.Close()
	}
	for _, c := range n.conns {
		c.Close()
	}
	n.conns, n.remotes = map[string]*grpc.ClientConn{}, map[string]*replica.Remote{}
	n.connsMu.Unlock()
	sw.at("store (badger flush and close)")
	if e := n.st.Close(); e != nil {
		errs = append(errs, fmt.Errorf("close store: %w", e))
	}
	n.logger.Info("node stopped")
	return errors.Join(errs...)
}

// stopStallGrace is how long a stop may run past its drain timeout before the log says
// where it is stuck.
const stopStallGrace = 10 * time.Second

// stopWatch names the stage of a stop that has run past its budget, and again every
// stopStallGrace until it ends: a node that does not exit after SIGTERM says in its log what
// it waits for (SIGQUIT then prints every goroutine's stack).
type stopWatch struct {
	mu    sync.Mutex
	stage string
	began time.Time
	end   chan struct{}
}

func watchStop(logger *slog.Logger, budget time.Duration) *stopWatch {
	w := &stopWatch{began: time.Now(), end: make(chan struct{})}
	go func() {
		t := time.NewTimer(budget)
		defer t.Stop()
		for {
			select {
			case <-w.end:
				return
			case <-t.C:
			}
			w.mu.Lock()
			stage := w.stage
			w.mu.Unlock()
			logger.Error("node stop stalled: still waiting for "+stage, "waited", time.Since(w.began).Round(time.Second))
			t.Reset(stopStallGrace)
		}
	}()
	return w
}

// at records that the stop now waits for stage.
func (w *stopWatch) at(stage string) {
	w.mu.Lock()
	w.stage = stage
	w.mu.Unlock()
}

func (w *stopWatch) done() { close(w.end) }

func wrapServe(name string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return fmt.Errorf("%s server: %w", name, err)
}

// Start creates a node and runs it in the background until ctx ends or Close.
func Start(ctx context.Context, cfg Config, logger *slog.Logger, opts ...Option) (*Node, error) {
	admin.KeepMutexWaitsTimed() // as Main does
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
