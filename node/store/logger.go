package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// badgerLogger routes badger's logger to slog. Badger is chatty at info
// level, so info and debug messages are dropped, except its reports of
// write stalls ("L0 was stalled for ...", and the lifetime total at Close):
// writes that waited for compaction explain latency spikes. Warnings and
// errors reach slog.
type badgerLogger struct{ l *slog.Logger }

var _ badger.Logger = badgerLogger{}

func (b badgerLogger) Errorf(format string, args ...any) {
	b.log(slog.LevelError, format, args)
}

func (b badgerLogger) Warningf(format string, args ...any) {
	b.log(slog.LevelWarn, format, args)
}

func (b badgerLogger) Infof(format string, args ...any) {
	if !strings.Contains(format, "stalled") {
		return
	}
	if msg := strings.TrimSpace(fmt.Sprintf(format, args...)); !strings.HasSuffix(msg, " 0s") {
		b.l.Info(msg, "component", "badger")
	}
}

func (badgerLogger) Debugf(string, ...any) {}

func (b badgerLogger) log(level slog.Level, format string, args []any) {
	ctx := context.Background()
	if !b.l.Enabled(ctx, level) {
		return
	}
	b.l.Log(ctx, level, strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}
