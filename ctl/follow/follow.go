package follow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/ctl/present"
)

// Stream is a watch stream of progress P (an Admin Watch* client stream).
type Stream[P any] interface {
	Recv() (P, error)
}

// Renderer draws progress P.
type Renderer[P any] interface {
	// Update draws p; force draws it even when piped and the last line is young.
	Update(p P, force bool)
	// Forget makes the next Update draw below what is on the terminal.
	Forget()
}

// Watch follows one operation over a watch stream of progress P until it has finished.
type Watch[P any] struct {
	// ErrOut takes the notes to the operator (a lost watch, Ctrl-C).
	ErrOut io.Writer
	// Addr is the node watched.
	Addr      string
	Reconnect time.Duration
	Render    Renderer[P]
	// Open opens the watch stream.
	Open func(ctx context.Context) (Stream[P], error)
	// Next takes each progress received: false when it no longer reports the operation.
	Next func(p P) bool
	// Finished tells whether p is the operation's end.
	Finished func(p P) bool
	// Resolve finds out how the operation ended once the watch no longer reports it.
	Resolve func(ctx context.Context, last P) (P, error)
	// RPCError words an error the watch cannot retry (Unimplemented, PermissionDenied,
	// Unauthenticated).
	RPCError func(err error) error
	// LostHint ends the error when the watch stays lost beyond Reconnect.
	LostHint string
	// Interrupted says how to watch again or abort after Ctrl-C, and returns the error.
	Interrupted func() error
}

var errGone = errors.New("no longer reported")

// Run follows until the operation has finished, and returns its last progress. A lost watch
// is re-opened for up to Reconnect. When ctx ends (Ctrl-C) it returns w.Interrupted().
func (w *Watch[P]) Run(ctx context.Context) (P, error) {
	var last P
	var lostAt time.Time
	for {
		err := func() error {
			stream, err := w.Open(ctx)
			if err != nil {
				return err
			}
			for {
				p, err := stream.Recv()
				if err != nil {
					return err
				}
				lostAt = time.Time{}
				if !w.Next(p) {
					return errGone
				}
				last = p
				if w.Finished(p) {
					w.Render.Update(p, true)
					return nil
				}
				w.Render.Update(p, false)
			}
		}()
		switch {
		case err == nil:
			return last, nil
		case ctx.Err() != nil:
			return last, w.Interrupted()
		case errors.Is(err, errGone) || errors.Is(err, io.EOF):
			return w.Resolve(ctx, last)
		}
		if s, ok := status.FromError(err); ok && (s.Code() == codes.Unimplemented || s.Code() == codes.PermissionDenied || s.Code() == codes.Unauthenticated) {
			return last, w.RPCError(err)
		}
		if lostAt.IsZero() {
			lostAt = time.Now()
			fmt.Fprintf(w.ErrOut, "lost the watch on %s (%s); retrying for %s\n", w.Addr, present.RPC(err), w.Reconnect)
			w.Render.Forget()
		}
		if time.Since(lostAt) > w.Reconnect {
			return last, fmt.Errorf("lost contact with %s: %s; %s", w.Addr, present.RPC(err), w.LostHint)
		}
		select {
		case <-ctx.Done():
			return last, w.Interrupted()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Interval is the interval to ask of a watch stream: the one asked, at least a second when
// piped (one line a second is all a pipe shows).
func Interval(asked time.Duration, tty bool) time.Duration {
	if !tty {
		return max(asked, time.Second)
	}
	return asked
}
