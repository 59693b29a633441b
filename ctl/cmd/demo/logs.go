package demo

import (
	"fmt"
	"io"
	"sync"
)

// maxHeld bounds the log bytes held while the console is open; later lines are counted.
const maxHeld = 64 << 10

// logSink is the demo's log output: it writes through to out, except between hold and
// release (the console owns the terminal), when it keeps the lines and prints them on
// release. Safe for concurrent use.
type logSink struct {
	mu      sync.Mutex
	out     io.Writer
	held    bool
	buf     []byte
	dropped int
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		return l.out.Write(p)
	}
	if len(l.buf)+len(p) > maxHeld {
		l.dropped++
		return len(p), nil
	}
	l.buf = append(l.buf, p...)
	return len(p), nil
}

func (l *logSink) hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = true
}

// release prints what was held and writes through again.
func (l *logSink) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = false
	if len(l.buf) > 0 {
		fmt.Fprintf(l.out, "kvctl demo: logged while the console was open:\n%s", l.buf)
	}
	if l.dropped > 0 {
		fmt.Fprintf(l.out, "kvctl demo: %d more log lines dropped\n", l.dropped)
	}
	l.buf, l.dropped = nil, 0
}
