package tui

import (
	"context"
	"time"

	tea "charm.land/bubbletea/v2"

	"ringkv/proto/kvpb"
)

// Commands: each one RPC (or one receive from a source stream) under its own deadline,
// answered by a named message.

func (m Model) fetchStatus() tea.Cmd {
	src, d := m.opts.Source, DefaultRPCTimeout
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		r, err := src.Status(ctx)
		return StatusMsg{Resp: r, Err: err}
	}
}

func (m Model) fetchRing() tea.Cmd {
	src, d := m.opts.Source, DefaultRPCTimeout
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		r, err := src.Ring(ctx)
		return RingMsg{Resp: r, Err: err}
	}
}

func (m Model) recvStats() tea.Cmd {
	ch := m.opts.Source.Stats()
	return func() tea.Msg {
		s, ok := <-ch
		if !ok {
			return sourceClosedMsg{"stats"}
		}
		return StatsMsg{Stats: s}
	}
}

func (m Model) recvChange() tea.Cmd {
	ch := m.opts.Source.Changes()
	return func() tea.Msg {
		p, ok := <-ch
		if !ok {
			return sourceClosedMsg{"changes"}
		}
		return ChangeMsg{Progress: p}
	}
}

func (m Model) tick() tea.Cmd {
	return tea.Tick(m.opts.Tick, func(time.Time) tea.Msg { return TickMsg{} })
}

func (m Model) refresh() tea.Cmd {
	return tea.Tick(m.opts.Refresh, func(time.Time) tea.Msg { return RefreshMsg{} })
}

func (m Model) plan(req *kvpb.ChangeRequest) tea.Cmd {
	if m.opts.Readonly {
		return nil
	}
	a := m.opts.Actions
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultRPCTimeout*3)
		defer cancel()
		p, err := a.PlanChange(ctx, req)
		return PlanMsg{Req: req, Plan: p, Err: err}
	}
}

func (m Model) profile(id, addr string) tea.Cmd {
	if m.opts.Readonly {
		return nil
	}
	a := m.opts.Actions
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultRPCTimeout+DefaultProfileSecs*time.Second*2)
		defer cancel()
		r, err := a.CPUProfile(ctx, id, addr, DefaultProfileSecs)
		return ProfileMsg{Node: id, Result: r, Err: err}
	}
}

func (m Model) startBench(rate int) tea.Cmd {
	if m.opts.Readonly {
		return nil
	}
	a := m.opts.Actions
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultRPCTimeout)
		defer cancel()
		return BenchMsg{Rate: rate, Err: a.StartBench(ctx, rate)}
	}
}

func (m Model) stopBench() tea.Cmd {
	if m.opts.Readonly {
		return nil
	}
	a := m.opts.Actions
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultRPCTimeout)
		defer cancel()
		return BenchMsg{Rate: 0, Err: a.StopBench(ctx)}
	}
}

func (m Model) startChange(req *kvpb.ChangeRequest) tea.Cmd {
	if m.opts.Readonly {
		return nil
	}
	a := m.opts.Actions
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultRPCTimeout*3)
		defer cancel()
		p, err := a.StartChange(ctx, req)
		return ChangeStartedMsg{Plan: p, Err: err}
	}
}
