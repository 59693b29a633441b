// Package follow follows a long operation of the cluster (a ring change, a repair session)
// over its Admin watch stream until it ends, drawing its progress on stderr: redrawn in place
// on a terminal, one line per interval when piped.
package follow

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// Screen is where progress is drawn.
type Screen struct {
	W   io.Writer
	TTY bool
	// Width is the terminal's width in columns (0 = 80): on a terminal every line is cut to
	// fit, so that a redraw overwrites it instead of leaving the wrapped rest behind.
	Width func() int
	// Every is the interval between lines when piped.
	Every time.Duration
}

// Drawing keeps what a progress renderer has drawn: how many lines stand on the terminal,
// and when the last line was printed when piped. The zero value has drawn nothing. Not safe
// for concurrent use.
type Drawing struct {
	drawn     int
	lastPrint time.Time
}

// Forget makes the next Draw start below what is on the terminal instead of over it (after a
// message was printed under the progress).
func (d *Drawing) Forget() { d.drawn = 0 }

// Draw draws one update at now on s. When piped it prints the header and the parts on one
// line, joined by "; ", at most once per s.Every unless force; on a terminal it redraws the
// header and lines in place, each cut to the width.
func (d *Drawing) Draw(s Screen, now time.Time, force bool, head string, parts, lines []string) {
	if !s.TTY {
		if !force && !d.lastPrint.IsZero() && now.Sub(d.lastPrint) < s.Every {
			return
		}
		d.lastPrint = now
		line := head
		if len(parts) > 0 {
			line += "; " + strings.Join(parts, "; ")
		}
		fmt.Fprintf(s.W, "%s %s\n", now.Format("15:04:05"), line)
		return
	}
	lines = append([]string{head}, lines...)
	w := 80
	if s.Width != nil && s.Width() > 0 {
		w = s.Width()
	}
	for i, l := range lines {
		// One column short of the width: a line that fills it wraps on some terminals.
		lines[i] = ansi.Truncate(l, w-1, "…")
	}
	var b strings.Builder
	if d.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", d.drawn)
	}
	for _, l := range lines {
		b.WriteString("\r\x1b[2K")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	for i := len(lines); i < d.drawn; i++ {
		b.WriteString("\r\x1b[2K\n")
	}
	if extra := d.drawn - len(lines); extra > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", extra)
	}
	d.drawn = len(lines)
	io.WriteString(s.W, b.String())
}
