// Package cli holds what every kvctl command shares: the IOStreams that output goes through,
// the Factory that dials a node, output formats, tables and the exit-code mapping.
package cli

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are the standard streams of one kvctl invocation. Results go to Out; progress,
// warnings and prompts go to ErrOut. Not safe for concurrent writes from several goroutines.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// OutTTY and ErrTTY tell whether Out / ErrOut are terminals: tables and in-place
	// progress on a terminal, plain lines when piped.
	OutTTY bool
	ErrTTY bool
	InTTY  bool
	// ErrWidth is the width of the terminal ErrOut writes to, in columns; 0 when unknown
	// (nil = unknown).
	ErrWidth func() int
	// OutWidth is the width of the terminal Out writes to; 0 when unknown (nil = unknown).
	OutWidth func() int
}

// System returns the process's standard streams.
func System() *IOStreams {
	return &IOStreams{
		In:     os.Stdin,
		Out:    os.Stdout,
		ErrOut: os.Stderr,
		OutTTY: term.IsTerminal(int(os.Stdout.Fd())),
		ErrTTY: term.IsTerminal(int(os.Stderr.Fd())),
		InTTY:  term.IsTerminal(int(os.Stdin.Fd())),
		ErrWidth: func() int {
			w, _, err := term.GetSize(int(os.Stderr.Fd()))
			if err != nil {
				return 0
			}
			return w
		},
		OutWidth: func() int {
			w, _, err := term.GetSize(int(os.Stdout.Fd()))
			if err != nil {
				return 0
			}
			return w
		},
	}
}

// Test returns streams backed by buffers, none of them a terminal.
func Test() (ios *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}
