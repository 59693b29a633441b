package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"ringkv/ctl/oncall"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
	"ringkv/tui/heatmap"
)

// OnCall is what the console asks every node for its on-call view: the hot keys it
// coordinated, its heat history and the latency it saw per vnode and replica. Each call asks every known node and returns the answers of
// those that answered (an error only when none did). Implementations are safe for concurrent use.
type OnCall interface {
	HotKeys(ctx context.Context, req *kvpb.HotKeysRequest) ([]*kvpb.HotKeysResponse, error)
	Heat(ctx context.Context, req *kvpb.HeatRequest) ([]*kvpb.HeatResponse, error)
	Vnodes(ctx context.Context, req *kvpb.VnodesRequest) ([]*kvpb.VnodesResponse, error)
}

var _ OnCall = (*AdminSource)(nil)

// HotKeys implements OnCall.
func (s *AdminSource) HotKeys(ctx context.Context, req *kvpb.HotKeysRequest) ([]*kvpb.HotKeysResponse, error) {
	return askAll(ctx, s, "hot keys", func(c kvpb.AdminClient) (*kvpb.HotKeysResponse, error) { return c.HotKeys(ctx, req) })
}

// Heat implements OnCall.
func (s *AdminSource) Heat(ctx context.Context, req *kvpb.HeatRequest) ([]*kvpb.HeatResponse, error) {
	return askAll(ctx, s, "heat", func(c kvpb.AdminClient) (*kvpb.HeatResponse, error) { return c.Heat(ctx, req) })
}

// Vnodes implements OnCall.
func (s *AdminSource) Vnodes(ctx context.Context, req *kvpb.VnodesRequest) ([]*kvpb.VnodesResponse, error) {
	return askAll(ctx, s, "vnodes", func(c kvpb.AdminClient) (*kvpb.VnodesResponse, error) { return c.Vnodes(ctx, req) })
}

// askAll calls fn on every node known from Status (the seeds before the first Status).
func askAll[T any](ctx context.Context, s *AdminSource, what string, fn func(kvpb.AdminClient) (T, error)) ([]T, error) {
	s.mu.Lock()
	addrs := slices.Clone(s.known)
	s.mu.Unlock()
	if len(addrs) == 0 {
		addrs = s.cfg.Seeds
	}
	var out []T
	var errs []error
	for _, a := range addrs {
		c, err := s.cfg.Dial(a)
		if err == nil {
			var v T
			if v, err = fn(c); err == nil {
				out = append(out, v)
				continue
			}
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w", what, errors.Join(errs...))
	}
	return out, nil
}

// Polling of the on-call view.
const (
	// livePoll is how often the hot-key alert asks for the live window: with the node's
	// live window, a skew shows within livePoll (and a tick) and the call's time.
	livePoll = time.Second
	// historyPoll is how often the history view reads the heat again while it is shown.
	historyPoll = 10 * time.Second
	// latencyPoll is how often the heatmap asks for the latency per vnode while it is shown
	// (the nodes' windows move by 5 s slices).
	latencyPoll = 2 * time.Second
)

// Thresholds of the hot-key alert: a key that makes its vnode hot alone, i.e. carries at
// least hotKeyShare of its vnode's operations and, by itself, hotVnodeFactor times the mean
// vnode's load and hotVnodeMin ops/s (the hot-vnode alert's thresholds); and that is hot for
// a node: at least hotKeyNodeShare of a node's fair share of the cluster's operations (the
// cluster's ops/s over the nodes that coordinate them: the keys are counted where they are
// coordinated, and a node the clients do not send to — one just added — carries none of
// that load, so it does not lower the share). The last keeps a mild skew quiet — the demo's
// zipf 1.1 load over 20k keys puts 12% of the operations on its top key, under half a node's
// share of the three nodes its clients send to, with a fourth added or not — while one key
// that takes a node's worth of load raises it.
const (
	hotKeyShare     = 0.5
	hotKeyNodeShare = 0.5
)

type (
	// LiveKeysMsg carries the live hot keys of every node that answered.
	LiveKeysMsg struct {
		Resp []*kvpb.HotKeysResponse
		Err  error
	}
	// HotKeysMsg carries the live hot keys asked for with k on the heatmap, for the vnodes
	// of the selected cell.
	HotKeysMsg struct {
		Title  string
		Vnodes []uint64
		Resp   []*kvpb.HotKeysResponse
		Err    error
	}
	// VnodesMsg carries the latency per vnode and replica of every node that answered.
	VnodesMsg struct {
		Resp []*kvpb.VnodesResponse
		Err  error
	}
)

// onCall returns the source as an OnCall, nil when it is not one.
func (m Model) onCall() OnCall {
	oc, _ := m.opts.Source.(OnCall)
	return oc
}

// pollOnCall runs on the console's tick: it asks for the live hot keys every livePoll (one
// call at a time) and, while the history view is shown, for the heat every historyPoll.
func (m *Model) pollOnCall() tea.Cmd {
	if m.onCall() == nil {
		return nil
	}
	now := m.opts.Now()
	var cmds []tea.Cmd
	if !m.liveBusy && (m.liveAt.IsZero() || now.Sub(m.liveAt) >= livePoll) {
		m.liveBusy, m.liveAt = true, now
		cmds = append(cmds, m.fetchLive())
	}
	if m.view == ScreenHistory && !m.showHelp && m.hist.asked && now.Sub(m.hist.at) >= historyPoll {
		cmds = append(cmds, m.fetchHeat())
	}
	if m.view == ScreenHeatmap && !m.latBusy && now.Sub(m.latAt) >= latencyPoll {
		cmds = append(cmds, m.fetchVnodes())
	}
	return tea.Batch(cmds...)
}

// fetchVnodes asks every node for the latency it saw per vnode and replica (one call at a time).
func (m *Model) fetchVnodes() tea.Cmd {
	oc := m.onCall()
	if oc == nil || m.latBusy {
		return nil
	}
	m.latBusy, m.latAt = true, m.opts.Now()
	return rpc(DefaultRPCTimeout, func(ctx context.Context) tea.Msg {
		r, err := oc.Vnodes(ctx, &kvpb.VnodesRequest{})
		return VnodesMsg{Resp: r, Err: err}
	})
}

// onVnodes keeps the merged latency per vnode for the heatmap; an error forgets it (the
// heatmap then shows "–", not stale figures).
func (m *Model) onVnodes(msg VnodesMsg) {
	m.latBusy, m.lat = false, nil
	if msg.Err == nil && m.ring != nil {
		m.lat = oncall.MergeVnodes(msg.Resp, nil, m.ring)
	}
	m.heat.SetRows(m.heatmapRows())
}

// heatmapRows are the heatmap's rows (heatRows) with each vnode's p99 and its replicas' calls
// as the coordinators saw them, when known.
func (m Model) heatmapRows() []heatmap.Row {
	rows := m.heatRows()
	if m.lat == nil {
		return rows
	}
	byToken := make(map[uint64]*oncall.Vnode, len(m.lat.Vnodes))
	for i := range m.lat.Vnodes {
		byToken[m.lat.Vnodes[i].Token()] = &m.lat.Vnodes[i]
	}
	peers := map[string]oncall.Peer{}
	for _, p := range m.lat.Peers {
		peers[p.Node] = p
	}
	// The coordinators whose breaker to each node is open.
	open := map[string][]string{}
	for _, id := range m.sortedIDs() {
		for _, b := range m.nodes[id].stats.GetBreakers() {
			if b.GetState() == kvpb.BreakerState_OPEN {
				open[b.GetPeer()] = append(open[b.GetPeer()], id)
			}
		}
	}
	for r := range rows {
		for i := range rows[r].Cells {
			c := &rows[r].Cells[i]
			v := byToken[c.End]
			if v == nil {
				continue
			}
			c.ReadP99, c.WriteP99 = duration(v.ReadP99Ms), duration(v.WriteP99Ms)
			calls := map[string]oncall.ReplicaLatency{}
			for _, rl := range v.ReplicaLatency {
				calls[rl.Node] = rl
			}
			c.Calls = []heatmap.ReplicaCalls{}
			for _, id := range c.Replicas {
				rc := heatmap.ReplicaCalls{Node: id, Breaker: present.BreakerState(kvpb.BreakerState_CLOSED)}
				if rl, ok := calls[id]; ok {
					rc.Calls, rc.P50, rc.P99 = rl.Calls, duration(rl.P50Ms), duration(rl.P99Ms)
				}
				p := peers[id]
				rc.Timeouts, rc.Hedges, rc.Trips = p.Timeouts, p.Hedges, p.BreakerTrips
				if by := open[id]; len(by) > 0 {
					rc.Breaker = fmt.Sprintf("%s (%s)", present.BreakerState(kvpb.BreakerState_OPEN), strings.Join(by, ","))
				}
				c.Calls = append(c.Calls, rc)
			}
		}
	}
	return rows
}

// duration is a latency in milliseconds as the merged answers carry it; nil stays nil.
func duration(ms *float64) *time.Duration {
	if ms == nil {
		return nil
	}
	d := time.Duration(*ms * float64(time.Millisecond))
	return &d
}

func (m Model) fetchLive() tea.Cmd {
	oc := m.onCall()
	return rpc(DefaultRPCTimeout, func(ctx context.Context) tea.Msg {
		r, err := oc.HotKeys(ctx, &kvpb.HotKeysRequest{Live: true, Limit: 20})
		return LiveKeysMsg{Resp: r, Err: err}
	})
}

// fetchVnodeKeys asks for the live hot keys of the heatmap's selected cell.
func (m Model) fetchVnodeKeys() tea.Cmd {
	oc := m.onCall()
	sel, ok := m.heat.Selected()
	if oc == nil || !ok || len(sel.Cells) == 0 {
		return nil
	}
	first, last := sel.Cells[0], sel.Cells[len(sel.Cells)-1]
	title := fmt.Sprintf("Hot keys of vnode %s on %s", present.TokenRangeShort(first.Start, last.End), first.Node)
	if len(sel.Cells) > 1 {
		title = fmt.Sprintf("Hot keys of %d vnodes %s on %s", len(sel.Cells), present.TokenRangeShort(first.Start, last.End), first.Node)
	}
	var vnodes []uint64
	for _, c := range sel.Cells {
		vnodes = append(vnodes, c.End)
	}
	return rpc(DefaultRPCTimeout, func(ctx context.Context) tea.Msg {
		r, err := oc.HotKeys(ctx, &kvpb.HotKeysRequest{Live: true})
		return HotKeysMsg{Title: title, Vnodes: vnodes, Resp: r, Err: err}
	})
}

// onLive keeps the live hot keys for the alert; an error forgets them (no stale alert).
func (m *Model) onLive(msg LiveKeysMsg) {
	m.live, m.liveBusy = nil, false
	if m.ring == nil {
		m.liveAt = time.Time{} // no ring to place the keys on yet: ask again at the next tick
		return
	}
	if msg.Err != nil {
		return
	}
	if res, err := oncall.MergeHotKeys(msg.Resp, m.ring, oncall.HotKeysQuery{}); err == nil {
		m.live = res
	}
}

// hotKeyAlert names the hottest key that makes its vnode hot by itself, "" when none does:
// "▲ hot key user:42 is 93% of vnode 0x12…-0x13… on n2: 850 ops/s".
func (m Model) hotKeyAlert() string {
	if m.live == nil || m.ring == nil {
		return ""
	}
	ring := oncall.NewRing(m.ring)
	vnodes := 0
	for _, mem := range m.ring.GetMembers() {
		vnodes += len(mem.GetTokens())
	}
	if vnodes == 0 {
		return ""
	}
	mean := m.live.OpsPerSec / float64(vnodes)
	nodes := m.live.Coordinators
	if nodes == 0 {
		nodes = len(m.ring.GetMembers())
	}
	fair := m.live.OpsPerSec / float64(nodes)
	for _, k := range m.live.Keys {
		rate := k.ReadsPerSec + k.WritesPerSec
		if k.ShareOfVnode < hotKeyShare || rate < hotVnodeMin || rate < hotVnodeFactor*mean || rate < hotKeyNodeShare*fair {
			continue
		}
		start, end := ring.Range(k.VnodeToken)
		return fmt.Sprintf("▲ hot key %s is %.0f%% of vnode %s on %s: %s ops/s", k.Key, 100*k.ShareOfVnode,
			present.TokenRangeShort(start, end), ring.Owner(k.VnodeToken), heatmap.FormatRate(rate))
	}
	return ""
}

// onHotKeys shows the selected vnode's hot keys in a dialog: one clear line when there are none.
func (m *Model) onHotKeys(msg HotKeysMsg) {
	if msg.Err != nil {
		m.openDialog(newResult(m.st, m.km, msg.Title, []string{msg.Err.Error()}, true))
		return
	}
	res, err := oncall.MergeHotKeys(msg.Resp, m.ring, oncall.HotKeysQuery{})
	var keys []oncall.HotKey
	if err == nil {
		for _, k := range res.Keys {
			if slices.Contains(msg.Vnodes, k.VnodeToken) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		m.openDialog(newResult(m.st, m.km, msg.Title, []string{"no operation on these keys in the last seconds: no hot key"}, false))
		return
	}
	const maxRows = 10
	body := []string{
		fmt.Sprintf("last %ds, live · %s ops/s in the vnode", res.WindowSeconds, heatmap.FormatRate(keys[0].VnodeOpsPerSec)),
		"",
		fmt.Sprintf("%-26s %7s %7s %6s %6s", "KEY", "READS/S", "WRITE/S", "VNODE%", "±OPS"),
	}
	for i, k := range keys {
		if i == maxRows {
			body = append(body, fmt.Sprintf("… %d more (kvctl hotkeys --vnode %s)", len(keys)-maxRows, k.Vnode))
			break
		}
		body = append(body, fmt.Sprintf("%-26s %7s %7s %5.1f%% %6d", clipText(k.Key, 26), heatmap.FormatRate(k.ReadsPerSec),
			heatmap.FormatRate(k.WritesPerSec), 100*k.ShareOfVnode, k.Error))
	}
	m.openDialog(newResult(m.st, m.km, msg.Title, body, false))
}

// clipText cuts s to w runes, marking the cut with ….
func clipText(s string, w int) string {
	r := []rune(s)
	if len(r) <= w {
		return s
	}
	return string(r[:w-1]) + "…"
}
