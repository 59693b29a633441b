package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	tea "charm.land/bubbletea/v2"
)

// RunOptions are the terminal streams; nil means the process's own terminal.
type RunOptions struct {
	In  io.Reader
	Out io.Writer
}

// Run opens the console on the terminal and blocks until the user quits (q, ctrl+c) or ctx
// ends; the terminal is restored either way. If opts.Source is a Runner, Run starts it and
// stops it before returning.
func Run(ctx context.Context, opts Options, ro ...RunOptions) error {
	if opts.Source == nil {
		return errors.New("tui: no source")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if r, ok := opts.Source.(Runner); ok {
		wg.Go(func() { _ = r.Run(ctx) })
	}
	defer wg.Wait()
	defer cancel()

	popts := []tea.ProgramOption{tea.WithContext(ctx)}
	for _, o := range ro {
		if o.In != nil {
			popts = append(popts, tea.WithInput(o.In))
		}
		if o.Out != nil {
			popts = append(popts, tea.WithOutput(o.Out))
		}
	}
	_, err := tea.NewProgram(New(opts), popts...).Run()
	if err != nil && ctx.Err() != nil && errors.Is(err, tea.ErrProgramKilled) {
		return nil // cancelled from outside: a clean stop
	}
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	return nil
}
