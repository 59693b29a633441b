package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
)

// LocalCluster is a cluster of founders inside one process on loopback ports, for tests
// and `kvctl demo`. Its methods are not safe for concurrent use.
type LocalCluster struct {
	ctx    context.Context
	logger *slog.Logger
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
	c := &LocalCluster{ctx: ctx, logger: logger, cfgs: make([]Config, n), nodes: make([]*Node, n)}
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
	return c, nil
}

// Len is the number of founders.
func (c *LocalCluster) Len() int { return len(c.cfgs) }

// Node returns founder i (0-based); nil while it is stopped.
func (c *LocalCluster) Node(i int) *Node { return c.nodes[i] }

// Config returns founder i's config.
func (c *LocalCluster) Config(i int) Config { return c.cfgs[i] }

// Stop drains and stops founder i, keeping its data directory.
func (c *LocalCluster) Stop(i int) error {
	if c.nodes[i] == nil {
		return nil
	}
	err := c.nodes[i].Close()
	c.nodes[i] = nil
	return err
}

// Restart starts a stopped founder i again on the same addresses and data directory.
func (c *LocalCluster) Restart(i int) error {
	if c.nodes[i] != nil {
		return fmt.Errorf("restart %s: still running", c.cfgs[i].ID)
	}
	nd, err := Start(c.ctx, c.cfgs[i], c.logger)
	if err != nil {
		return fmt.Errorf("restart %s: %w", c.cfgs[i].ID, err)
	}
	c.nodes[i] = nd
	return nil
}

// Close stops every running founder in parallel.
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
