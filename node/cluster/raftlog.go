package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sort"

	"github.com/hashicorp/go-hclog"
)

// raftLogger is the hclog logger raft writes through: each of raft's lines becomes one slog
// record at the level raft gave it (its "[ERROR]" is slog's ERROR, so level=ERROR finds it),
// with raft's key/value pairs as attributes and module=raft (the logger's component is cluster).
func raftLogger(logger *slog.Logger, level string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        "raft",
		Level:       hclog.LevelFromString(level),
		Output:      &raftLogWriter{logger: logger},
		JSONFormat:  true,
		DisableTime: true,
	})
}

// raftLogWriter receives hclog's JSON lines, one per Write.
type raftLogWriter struct{ logger *slog.Logger }

func (w *raftLogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte("\n")) {
		w.writeLine(line)
	}
	return len(p), nil
}

func (w *raftLogWriter) writeLine(line []byte) {
	var fields map[string]any
	if err := json.Unmarshal(line, &fields); err != nil {
		w.logger.Info(string(line), "module", "raft")
		return
	}
	msg, _ := fields["@message"].(string)
	lvl, _ := fields["@level"].(string)
	attrs := []slog.Attr{slog.String("module", "raft")}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k == "" || k[0] != '@' {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, fields[k]))
	}
	w.logger.LogAttrs(context.Background(), slogLevel(lvl), msg, attrs...)
}

// slogLevel maps an hclog level name to slog's.
func slogLevel(l string) slog.Level {
	switch l {
	case "error":
		return slog.LevelError
	case "warn":
		return slog.LevelWarn
	case "debug", "trace":
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
