package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// badgerLogger routes badger's logger to slog. Badger is chatty at info
// level, so info and debug messages are dropped: only warnings and errors
// reach slog.
type badgerLogger struct{ l *slog.Logger }

var _ badger.Logger = badgerLogger{}

func (b badgerLogger) Errorf(format string, args ...any) {
	b.log(slog.LevelError, format, args)
}

func (b badgerLogger) Warningf(format string, args ...any) {
	b.log(slog.LevelWarn, format, args)
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}

func (b badgerLogger) log(level slog.Level, format string, args []any) {
	ctx := context.Background()
	if !b.l.Enabled(ctx, level) {
		return
	}
	b.l.Log(ctx, level, strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}
