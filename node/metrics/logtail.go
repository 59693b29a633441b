package metrics

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
)

// LogRing is a slog.Handler that keeps the last lines of the node's log in memory (for the
// Admin LogTail RPC and kvctl debug zip) and passes every record on to another handler.
// Attributes named value, values, secret or password are dropped from both, defensively:
// nobody should log a value or the cluster secret, and if someone does it goes nowhere.
// Safe for concurrent use.
type LogRing struct {
	next  slog.Handler
	text  slog.Handler // formats lines into the ring
	level slog.Leveler
	ring  *lineRing
}

type lineRing struct {
	mu    sync.Mutex
	lines []string
	head  int // index of the oldest line once full
	full  bool
}

// NewLogRing keeps the last n lines at level and above (nil level = Info) and forwards every
// record to next (nil = keep only).
func NewLogRing(next slog.Handler, n int, level slog.Leveler) *LogRing {
	if level == nil {
		level = slog.LevelInfo
	}
	lr := &lineRing{lines: make([]string, max(n, 1))}
	return &LogRing{
		next:  next,
		level: level,
		ring:  lr,
		text: slog.NewTextHandler(lr, &slog.HandlerOptions{
			Level: slog.LevelDebug, // the LogRing's own Enabled decides
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if secretAttr(a.Key) {
					return slog.Attr{}
				}
				return a
			},
		}),
	}
}

func secretAttr(key string) bool {
	switch strings.ToLower(key) {
	case "value", "values", "secret", "password":
		return true
	}
	return false
}

// Enabled reports whether either the ring or next wants records at level.
func (h *LogRing) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.level.Level() || (h.next != nil && h.next.Enabled(ctx, level))
}

// Handle stores the record as one text line and forwards it, without secret attributes.
func (h *LogRing) Handle(ctx context.Context, rec slog.Record) error {
	clean := slog.NewRecord(rec.Time, rec.Level, rec.Message, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		if a, ok := scrub(a); ok {
			clean.AddAttrs(a)
		}
		return true
	})
	if rec.Level >= h.level.Level() {
		_ = h.text.Handle(ctx, clean) // writes to memory; cannot fail
	}
	if h.next != nil && h.next.Enabled(ctx, rec.Level) {
		return h.next.Handle(ctx, clean)
	}
	return nil
}

// scrub drops secret attributes, also inside groups.
func scrub(a slog.Attr) (slog.Attr, bool) {
	if secretAttr(a.Key) {
		return slog.Attr{}, false
	}
	if a.Value.Kind() != slog.KindGroup {
		return a, true
	}
	var kept []slog.Attr
	for _, g := range a.Value.Group() {
		if g, ok := scrub(g); ok {
			kept = append(kept, g)
		}
	}
	return slog.Attr{Key: a.Key, Value: slog.GroupValue(kept...)}, true
}

// WithAttrs returns a handler that adds attrs to every record, in the ring and in next.
func (h *LogRing) WithAttrs(attrs []slog.Attr) slog.Handler {
	var kept []slog.Attr
	for _, a := range attrs {
		if a, ok := scrub(a); ok {
			kept = append(kept, a)
		}
	}
	c := *h
	c.text = h.text.WithAttrs(kept)
	if h.next != nil {
		c.next = h.next.WithAttrs(kept)
	}
	return &c
}

// WithGroup returns a handler that nests later attributes under name.
func (h *LogRing) WithGroup(name string) slog.Handler {
	c := *h
	c.text = h.text.WithGroup(name)
	if h.next != nil {
		c.next = h.next.WithGroup(name)
	}
	return &c
}

// Lines returns up to n of the most recent lines, oldest first (n <= 0: all kept lines).
func (h *LogRing) Lines(n int) []string {
	r := h.ring
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []string
	if r.full {
		all = append(append(all, r.lines[r.head:]...), r.lines[:r.head]...)
	} else {
		all = append(all, r.lines[:r.head]...)
	}
	if n > 0 && n < len(all) {
		all = all[len(all)-n:]
	}
	return all
}

// Write stores one formatted line (slog's TextHandler writes each record in one call).
func (r *lineRing) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines[r.head] = line
	r.head++
	if r.head == len(r.lines) {
		r.head, r.full = 0, true
	}
	return len(p), nil
}
