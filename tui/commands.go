package tui

import (
	"context"
	"fmt"
	"time"

	tea "charm.land/bubbletea/v2"

	"ringkv/proto/kvpb"
)

// Commands: each one RPC (or one receive from a source stream) under its own deadline,
// answered by a named message.

// rpc is a command that runs call under a deadline of d and returns its message.
func rpc(d time.Duration, call func(ctx context.Context) tea.Msg) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return call(ctx)
	}
}

// action is rpc on the console's Actions; a readonly console runs none (nil).
func (m Model) action(d time.Duration, call func(ctx context.Context, a Actions) tea.Msg) tea.Cmd {
	if m.opts.Readonly {
		return nil
	}
	a := m.opts.Actions
	return rpc(d, func(ctx context.Context) tea.Msg { return call(ctx, a) })
}

// recv is a command that receives one value from a source stream; a closed stream answers
// sourceClosedMsg{what}.
func recv[T any](ch <-chan T, what string, msg func(T) tea.Msg) tea.Cmd {
	return func() tea.Msg {
		v, ok := <-ch
		if !ok {
			return sourceClosedMsg{what}
		}
		return msg(v)
	}
}

func (m Model) fetchStatus() tea.Cmd {
	src := m.opts.Source
	return rpc(DefaultRPCTimeout, func(ctx context.Context) tea.Msg {
		r, err := src.Status(ctx)
		return StatusMsg{Resp: r, Err: err}
	})
}

func (m Model) fetchRing() tea.Cmd {
	src := m.opts.Source
	return rpc(DefaultRPCTimeout, func(ctx context.Context) tea.Msg {
		r, err := src.Ring(ctx)
		return RingMsg{Resp: r, Err: err}
	})
}

func (m Model) recvStats() tea.Cmd {
	return recv(m.opts.Source.Stats(), "stats", func(s *kvpb.NodeStats) tea.Msg { return StatsMsg{Stats: s} })
}

func (m Model) recvChange() tea.Cmd {
	return recv(m.opts.Source.Changes(), "changes", func(p *kvpb.ChangeProgress) tea.Msg { return ChangeMsg{Progress: p} })
}

func (m Model) tick() tea.Cmd {
	return tea.Tick(m.opts.Tick, func(time.Time) tea.Msg { return TickMsg{} })
}

func (m Model) refresh() tea.Cmd {
	return tea.Tick(m.opts.Refresh, func(time.Time) tea.Msg { return RefreshMsg{} })
}

func (m Model) plan(req *kvpb.ChangeRequest) tea.Cmd {
	return m.action(DefaultRPCTimeout*3, func(ctx context.Context, a Actions) tea.Msg {
		p, err := a.PlanChange(ctx, req)
		return PlanMsg{Req: req, Plan: p, Err: err}
	})
}

func (m Model) startChange(req *kvpb.ChangeRequest) tea.Cmd {
	return m.action(DefaultRPCTimeout*3, func(ctx context.Context, a Actions) tea.Msg {
		p, err := a.StartChange(ctx, req)
		return ChangeStartedMsg{Plan: p, Err: err}
	})
}

// pauseChange pauses the ring change in flight, or resumes it; Actions that are no
// ChangePauser answer ErrNotAvailable.
func (m Model) pauseChange(resume bool) tea.Cmd {
	return m.action(DefaultRPCTimeout*3, func(ctx context.Context, a Actions) tea.Msg {
		cp, ok := a.(ChangePauser)
		if !ok {
			return PauseMsg{Resume: resume, Err: fmt.Errorf("pause: %w", ErrNotAvailable)}
		}
		var p *kvpb.ChangeProgress
		var err error
		if resume {
			p, err = cp.ResumeChange(ctx)
		} else {
			p, err = cp.PauseChange(ctx, ConsolePauseReason)
		}
		return PauseMsg{Resume: resume, Progress: p, Err: err}
	})
}

// pauseRepair pauses repair, or resumes it; Actions that are no RepairPauser answer
// ErrNotAvailable.
func (m Model) pauseRepair(resume bool) tea.Cmd {
	return m.action(DefaultRPCTimeout*3, func(ctx context.Context, a Actions) tea.Msg {
		rp, ok := a.(RepairPauser)
		if !ok {
			return RepairPauseMsg{Resume: resume, Err: fmt.Errorf("pause repair: %w", ErrNotAvailable)}
		}
		var p *kvpb.RepairProgress
		var err error
		if resume {
			p, err = rp.ResumeRepair(ctx)
		} else {
			p, err = rp.PauseRepair(ctx, ConsolePauseReason)
		}
		return RepairPauseMsg{Resume: resume, Progress: p, Err: err}
	})
}

// ConsolePauseReason is the reason the console journals with a pause.
const ConsolePauseReason = "paused from the console"

func (m Model) profile(id, addr string) tea.Cmd {
	return m.action(DefaultRPCTimeout+DefaultProfileSecs*time.Second*2, func(ctx context.Context, a Actions) tea.Msg {
		r, err := a.CPUProfile(ctx, id, addr, DefaultProfileSecs)
		return ProfileMsg{Node: id, Result: r, Err: err}
	})
}

func (m Model) startBench(rate int) tea.Cmd {
	return m.action(DefaultRPCTimeout, func(ctx context.Context, a Actions) tea.Msg {
		return BenchMsg{Rate: rate, Err: a.StartBench(ctx, rate)}
	})
}

// drawBenchChart draws the running bench's chart for the body (BenchCharter); nil when the
// actions cannot draw one or no bench runs.
func (m Model) drawBenchChart() tea.Cmd {
	bc, ok := m.opts.Actions.(BenchCharter)
	if !ok || m.bench == 0 {
		return nil
	}
	w, h := m.width, m.benchChartHeight()
	return func() tea.Msg { return BenchChartMsg{Chart: bc.BenchChart(w, h)} }
}

func (m Model) stopBench() tea.Cmd {
	return m.action(DefaultRPCTimeout, func(ctx context.Context, a Actions) tea.Msg {
		line, err := a.StopBench(ctx)
		return BenchMsg{Rate: 0, Result: line, Err: err}
	})
}

// nodeControlTimeout bounds a stop or start of a node's process: a start waits until the node
// serves (up to 30 s in node.LocalCluster).
const nodeControlTimeout = 45 * time.Second

func (m Model) controlNode(id string, stop bool) tea.Cmd {
	nc := m.opts.Nodes
	if nc == nil || m.opts.Readonly {
		return nil
	}
	return rpc(nodeControlTimeout, func(ctx context.Context) tea.Msg {
		if stop {
			return NodeMsg{ID: id, Stop: true, Err: nc.StopNode(ctx, id)}
		}
		return NodeMsg{ID: id, Err: nc.StartNode(ctx, id)}
	})
}
