package cluster

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestRaftLogLevels: raft's own lines keep their level in slog (an "[ERROR]" of raft is
// level=ERROR, not an INFO line that says ERROR), with its key/value pairs as attributes.
func TestRaftLogLevels(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := raftLogger(logger, "info")
	h.Error("failed to contact", "server-id", "n2", "error", "connection refused")
	h.Warn("heartbeat timeout reached")
	h.Info("entering follower state", "term", 3)
	h.Debug("below raft's level: dropped")

	type rec struct {
		Level, Msg, Module string
		ServerID           string `json:"server-id"`
		Term               float64
	}
	var got []rec
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r rec
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, r)
	}
	want := []rec{
		{Level: "ERROR", Msg: "failed to contact", Module: "raft", ServerID: "n2"},
		{Level: "WARN", Msg: "heartbeat timeout reached", Module: "raft"},
		{Level: "INFO", Msg: "entering follower state", Module: "raft", Term: 3},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}
