package metrics

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestLogRing(t *testing.T) {
	var next bytes.Buffer
	h := NewLogRing(slog.NewTextHandler(&next, nil), 3, nil)
	log := slog.New(h).With("node", "n1", "secret", "hunter2")
	log.Debug("not kept")
	for i := range 5 {
		log.Info("put", "key", fmt.Sprintf("k%d", i), "value", "SENSITIVE", slog.Group("req", "Value", "SENSITIVE", "ack", 2))
	}
	log.WithGroup("ring").Warn("epoch", "n", 7, "password", "pw")

	got := h.Lines(0)
	if len(got) != 3 {
		t.Fatalf("got %d lines, want 3: %q", len(got), got)
	}
	wantIn := []string{"key=k3", "key=k4", "ring.n=7"}
	for i, line := range got {
		if !strings.Contains(line, wantIn[i]) || !strings.Contains(line, "node=n1") {
			t.Errorf("line %d: got %q, want it to contain %q and node=n1", i, line, wantIn[i])
		}
	}
	if strings.Contains(got[1], "req.ack=2") == false {
		t.Errorf("got %q, want the group's other attributes kept", got[1])
	}
	for _, out := range append(got, next.String()) {
		for _, leak := range []string{"SENSITIVE", "hunter2", "pw", "value=", "secret="} {
			if strings.Contains(out, leak) {
				t.Errorf("got %q, want no %q", out, leak)
			}
		}
	}
	if n := strings.Count(next.String(), "\n"); n != 6 {
		t.Errorf("next handler got %d lines, want 6 (info and above)", n)
	}
	if got := h.Lines(1); len(got) != 1 || !strings.Contains(got[0], "epoch") {
		t.Errorf("Lines(1): got %q, want the last line", got)
	}
}
