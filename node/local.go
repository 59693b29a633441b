package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"time"
)

// LocalCluster is a cluster of founders inside one process on loopback ports, for tests
// and `kvctl demo`; StartEmpty adds nodes that await admission. Its methods are not safe
// for concurrent use.
type LocalCluster struct {
	ctx    context.Context
	logger *slog.Logger
	base   Config
	dir    string
	cfgs   []Config
	nodes  []*Node // nil while stopped
}

// StartLocalCluster starts n founders named n1..nN on free 127.0.0.1 ports, with their
// badger directories under dir (ignored when base.InMemory). base supplies the other
// settings (Replicas, VNodes, ...); its addresses, ID, DataDir and Peers are replaced.
func StartLocalCluster(ctx context.Context, n int, base Config, dir string, logger *slog.Logger) (*LocalCluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: local cluster of %d nodes", ErrInvalidConfig, n)
	}
	lns := make([]net.Listener, n)
	closeAll := func() {
		for _, l := range lns {
			if l != nil {
				l.Close()
			}
		}
	}
	peers := make([]Peer, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("listen: %w", err)
		}
		lns[i] = l
		peers[i] = Peer{ID: fmt.Sprintf("n%d", i+1), Addr: l.Addr().String()}
	}
	c := &LocalCluster{ctx: ctx, logger: logger, base: base, dir: dir, cfgs: make([]Config, n), nodes: make([]*Node, n)}
	for i := range n {
		cfg := base
		cfg.ID, cfg.Peers = peers[i].ID, peers
		cfg.GRPCAddr, cfg.HTTPAddr, cfg.AdminAddr = peers[i].Addr, "127.0.0.1:0", "127.0.0.1:0"
		if !cfg.InMemory {
			cfg.DataDir = filepath.Join(dir, cfg.ID)
		}
		c.cfgs[i] = cfg
		nd, err := Start(ctx, cfg, logger, WithListeners(lns[i], nil, nil))
		lns[i] = nil
		if err != nil {
			for _, l := range lns {
				if l != nil {
					l.Close()
				}
			}
			return nil, errors.Join(err, c.Close())
		}
		c.nodes[i] = nd
		// Keep the HTTP and admin ports across restarts.
		a := nd.Addrs()
		c.cfgs[i].HTTPAddr, c.cfgs[i].AdminAddr = a.HTTP, a.Admin
	}
	// As a client would (the course's tests poll /v0/status): the cluster is used from here on.
	for i, nd := range c.nodes {
		rctx, cancel := context.WithTimeout(ctx, readyWait)
		err := nd.WaitReady(rctx)
		cancel()
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s not ready: %w", c.cfgs[i].ID, err), c.Close())
		}
	}
	return c, nil
}

// StartEmpty starts one more node named id, without --peers: it serves nothing ("awaiting
// admission") until a ring change (kvctl ring add id=addr) admits it. It returns the node's
// index for Node, Config, Stop and Restart.
func (c *LocalCluster) StartEmpty(id string) (int, error) {
	for _, cfg := range c.cfgs {
		if cfg.ID == id {
			return 0, fmt.Errorf("%w: local cluster: %q already exists", ErrInvalidConfig, id)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("listen: %w", err)
	}
	cfg := c.base
	cfg.ID, cfg.Peers = id, nil
	cfg.GRPCAddr, cfg.HTTPAddr, cfg.AdminAddr = l.Addr().String(), "127.0.0.1:0", "127.0.0.1:0"
	if !cfg.InMemory {
		cfg.DataDir = filepath.Join(c.dir, id)
	}
	nd, err := Start(c.ctx, cfg, c.logger, WithListeners(l, nil, nil))
	if err != nil {
		return 0, err
	}
	a := nd.Addrs()
	cfg.HTTPAddr, cfg.AdminAddr = a.HTTP, a.Admin
	c.cfgs = append(c.cfgs, cfg)
	c.nodes = append(c.nodes, nd)
	return len(c.nodes) - 1, nil
}

// Len is the number of nodes: the founders, then those added with StartEmpty.
func (c *LocalCluster) Len() int { return len(c.cfgs) }

// Node returns node i (0-based); nil while it is stopped.
func (c *LocalCluster) Node(i int) *Node { return c.nodes[i] }

// Config returns node i's config.
func (c *LocalCluster) Config(i int) Config { return c.cfgs[i] }

// Stop drains and stops node i, keeping its data directory.
func (c *LocalCluster) Stop(i int) error {
	if c.nodes[i] == nil {
		return nil
	}
	err := c.nodes[i].Close()
	c.nodes[i] = nil
	return err
}

// Restart starts a stopped node i again on the same addresses and data directory.
func (c *LocalCluster) Restart(i int) error {
	if c.nodes[i] != nil {
		return fmt.Errorf("restart %s: still running", c.cfgs[i].ID)
	}
	nd, err := Start(c.ctx, c.cfgs[i], c.logger)
	if err != nil {
		return fmt.Errorf("restart %s: %w", c.cfgs[i].ID, err)
	}
	c.nodes[i] = nd
	// As a client would (the course's tests poll /v0/status): the node is used from here on.
	ctx, cancel := context.WithTimeout(c.ctx, readyWait)
	defer cancel()
	if err := nd.WaitReady(ctx); err != nil {
		return fmt.Errorf("restart %s: not ready: %w", c.cfgs[i].ID, err)
	}
	return nil
}

// readyWait bounds how long Restart waits for a restarted node to be ready.
const readyWait = 30 * time.Second

// Close stops every running node in parallel.
func (c *LocalCluster) Close() error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Go(func() {
			if err := c.Stop(i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
