package demo

import (
	"context"
	"fmt"
	"sync"

	"ringkv/node"
	console "ringkv/tui"
)

// nodes stops and starts the demo's node processes for the console (its x and X), one at a
// time: node.LocalCluster is not safe for concurrent use. Close stops them all, after a stop
// or start in progress.
type nodes struct {
	mu sync.Mutex
	c  *node.LocalCluster
}

var _ console.NodeControl = (*nodes)(nil)

func (n *nodes) index(id string) (int, error) {
	for i := range n.c.Len() {
		if n.c.Config(i).ID == id {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no node %q in this demo", id)
}

// StopNode implements console.NodeControl: it drains and stops the node, keeping its data.
func (n *nodes) StopNode(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	i, err := n.index(id)
	if err != nil {
		return err
	}
	if n.c.Node(i) == nil {
		return fmt.Errorf("%s is already stopped (X starts it)", id)
	}
	return n.c.Stop(i)
}

// StartNode implements console.NodeControl: it starts a stopped node on its data and
// addresses and waits until it serves.
func (n *nodes) StartNode(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	i, err := n.index(id)
	if err != nil {
		return err
	}
	if n.c.Node(i) != nil {
		return fmt.Errorf("%s is running (x stops it)", id)
	}
	return n.c.Restart(i)
}

// Close stops every node.
func (n *nodes) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.c.Close()
}
