// Package clustertest starts in-process clusters (node.LocalCluster: real badger, real gRPC
// and HTTP on loopback) for the tests of the packages that drive one.
package clustertest

import (
	"context"
	"log/slog"
	"testing"

	"ringkv/node"
)

// Start starts n nodes configured from base, their data in t's temp dirs and their logs
// discarded, and closes them when the test ends; a failed start or close fails the test.
func Start(t testing.TB, n int, base node.Config) *node.LocalCluster {
	t.Helper()
	c, err := node.StartLocalCluster(context.Background(), n, base, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	return c
}
