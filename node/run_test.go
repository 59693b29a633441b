package node

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"ringkv/internal/syncbuf"
)

// TestStopWatchNamesTheStall: a stop that runs past its budget says in the log which stage
// it still waits for; one that ends in time says nothing.
func TestStopWatchNamesTheStall(t *testing.T) {
	var log syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	w := watchStop(logger, 20*time.Millisecond)
	w.at("coordinator")
	w.at("store (badger flush and close)")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(log.String(), "still waiting for store (badger flush and close)") {
		if time.Now().After(deadline) {
			t.Fatalf("no stall named within 5 s of a 20 ms budget; log:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.done()

	var quiet syncbuf.Buffer
	w = watchStop(slog.New(slog.NewTextHandler(&quiet, nil)), 50*time.Millisecond)
	w.at("coordinator")
	w.done()
	time.Sleep(100 * time.Millisecond)
	if quiet.String() != "" {
		t.Errorf("a stop that ended in time logged %q", quiet.String())
	}
}
