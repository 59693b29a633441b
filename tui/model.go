// Package tui is ringkv's console: a live node table, a shard heatmap, ring changes in flight
// and operator actions, drawn with bubbletea v2. Data comes from a Source, actions go through
// an Actions; both are injected through Options.
package tui

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"ringkv/ctl/oncall"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
	"ringkv/tui/heatmap"
	"ringkv/tui/keys"
	"ringkv/tui/styles"
)

// Defaults of Options.
const (
	DefaultDownAfter   = 1500 * time.Millisecond
	DefaultTick        = 250 * time.Millisecond
	DefaultRefresh     = 2 * time.Second
	DefaultRPCTimeout  = 3 * time.Second
	DefaultProfileSecs = 5
	sparkSamples       = 60
	maxEvents          = 200
)

// Options configure the console.
type Options struct {
	Source  Source
	Actions Actions // nil = readonly
	// Readonly disables every action.
	Readonly bool
	// Hint is an optional line shown under the title (the demo explains itself there).
	Hint string
	// Warning is an optional line shown in red under the hint: what the operator must know
	// before trusting the screen (the demo says so when its fill failed or a node is not up).
	Warning string
	// Spares are running nodes awaiting admission (the demo starts some): a plans the add of
	// the first one not yet in the cluster, so that y adds it.
	Spares []Spare
	// Nodes, when set, stops and starts node processes (the demo's): the keys x and X, shown
	// only then. nil in a console on a real cluster.
	Nodes NodeControl
	// Start is the view the console opens on (default the overview).
	Start Screen
	// Now is the clock; nil = time.Now. Tests inject a fixed one.
	Now func() time.Time
	// DownAfter: a node with no stats sample for this long is shown DOWN (default 1.5s, so with
	// the 250ms tick it turns red within 2s).
	DownAfter time.Duration
	// Tick is how often the console re-checks deadlines (default 250ms); Refresh how often it
	// re-reads Status and Ring (default 2s).
	Tick    time.Duration
	Refresh time.Duration
}

func (o *Options) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DownAfter <= 0 {
		o.DownAfter = DefaultDownAfter
	}
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Actions == nil {
		o.Readonly = true
	}
}

// Screen is one of the console's views.
type Screen int

// The views, in tab order.
const (
	ScreenOverview Screen = iota
	ScreenHeatmap
	ScreenChanges
	ScreenHistory
	numViews
)

var viewNames = [...]string{"1 overview", "2 heatmap", "3 changes", "4 history"}

// Sort columns of the overview.
type sortCol int

const (
	sortNode sortCol = iota
	sortOps
	sortP99
	sortKeys
	sortDisk
	sortShare
	numSorts
)

var sortNames = [...]string{"node", "ops/s", "p99", "keys", "disk", "share"}

// Model is the console's root model: the cluster state (its reducer is clusterState.apply),
// the view the operator is on, and the components (heatmap, dialog, help).
type Model struct {
	clusterState

	opts   Options
	st     styles.Styles
	km     keys.KeyMap
	help   help.Model
	heat   heatmap.Model
	width  int
	height int

	view     Screen
	showHelp bool
	sortBy   sortCol
	selected int // index into the sorted node rows

	bench int // running bench rate, 0 = none
	// benchChart is the running bench's chart as last drawn; benchTicks counts ticks
	// between two drawings.
	benchChart string
	benchTicks int
	dialog     dialog

	live     *oncall.HotKeys // the live hot keys, for the hot-key alert (nil: none or unknown)
	liveAt   time.Time       // when they were last asked for
	liveBusy bool            // a call for them is under way
	hist     history

	lat     *oncall.Vnodes // the latency per vnode and replica, for the heatmap (nil: unknown)
	latAt   time.Time      // when it was last asked for
	latBusy bool           // a call for it is under way
	// lastChange is the last finished ring change with its predicted and observed load.
	lastChange *kvpb.ChangeRecord
}

// New returns the console's model on opts.
func New(opts Options) Model {
	opts.defaults()
	st := styles.DefaultStyles()
	km := keys.DefaultKeyMap()
	km.SetReadonly(opts.Readonly)
	km.SetNodeControl(opts.Nodes != nil && !opts.Readonly)
	h := help.New()
	h.Styles = st.Help
	m := Model{
		clusterState: newClusterState(opts.Now(), opts.DownAfter),
		opts:         opts,
		st:           st,
		km:           km,
		help:         h,
		heat:         heatmap.New(st, km),
		width:        80,
		height:       24,
		view:         max(0, min(opts.Start, numViews-1)),
	}
	m.heat.SetCalls(m.onCall() != nil)
	m.resize()
	return m
}

// Init fetches status and ring, and starts receiving the streams and the tick.
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.fetchStatus(), m.fetchRing(), m.recvStats(), m.recvChange(), m.tick())
}

func (m *Model) resize() {
	m.help.SetWidth(m.width)
	m.heat.SetSize(m.width, m.bodyHeight())
	m.dialog.SetSize(m.width, m.bodyHeight())
}

// Update handles one message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	// The source's messages go through the reducer, then ask for the next one.
	switch msg.(type) {
	case StatusMsg, RingMsg, StatsMsg, ChangeMsg, TickMsg:
		if m.apply(msg, m.opts.Now()) {
			m.heat.SetRows(m.heatmapRows())
		}
	}
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.resize()
		return m, nil
	case tea.KeyPressMsg:
		was := m.view
		next, cmd := m.onKey(msg)
		if nm, ok := next.(Model); ok && nm.view == ScreenHistory && was != ScreenHistory {
			fetch := nm.fetchHeat() // the history is read as the view opens
			return nm, tea.Batch(cmd, fetch)
		}
		if nm, ok := next.(Model); ok && nm.view == ScreenHeatmap && was != ScreenHeatmap {
			fetch := nm.fetchVnodes() // and the latency per vnode as the heatmap opens
			return nm, tea.Batch(cmd, fetch)
		}
		return next, cmd
	case RingMsg:
		return m, m.refresh()
	case RefreshMsg:
		return m, tea.Batch(m.fetchStatus(), m.fetchRing(), m.fetchLastChange())
	case LastChangeMsg:
		m.onLastChange(msg)
		return m, nil
	case StatsMsg:
		return m, m.recvStats()
	case ChangeMsg:
		return m, m.recvChange()
	case TickMsg:
		poll := m.pollOnCall()
		if m.benchTicks++; m.benchTicks*int(m.opts.Tick/time.Millisecond) >= 1000 {
			m.benchTicks = 0
			return m, tea.Batch(m.tick(), m.drawBenchChart(), poll)
		}
		return m, tea.Batch(m.tick(), poll)
	case BenchChartMsg:
		if m.bench > 0 {
			m.benchChart = msg.Chart
		}
		return m, nil
	case LiveKeysMsg:
		m.onLive(msg)
		return m, nil
	case HotKeysMsg:
		m.onHotKeys(msg)
		return m, nil
	case HeatMsg:
		m.onHeat(msg)
		return m, nil
	case VnodesMsg:
		m.onVnodes(msg)
		return m, nil
	case inputMsg:
		return m.submitInput(msg)
	case PlanMsg:
		m.onPlan(msg)
		return m, nil
	case ChangeStartedMsg:
		if msg.Err != nil {
			m.openDialog(newResult(m.st, m.km, "Change refused", []string{msg.Err.Error()}, true))
			return m, nil
		}
		m.dialog = dialog{}
		m.logEvent(m.opts.Now(), fmt.Sprintf("change #%d started: %s", msg.Plan.GetId(), present.Change(msg.Plan.GetRequest())), false)
		m.view = ScreenChanges
		return m, nil
	case ProfileMsg:
		if msg.Err != nil {
			m.openDialog(newResult(m.st, m.km, "CPU profile of "+msg.Node, []string{msg.Err.Error()}, true))
			return m, nil
		}
		body := append([]string{"wrote " + msg.Result.Path, "", "top functions (flat):"}, msg.Result.Top...)
		m.openDialog(newResult(m.st, m.km, "CPU profile of "+msg.Node, body, false))
		return m, nil
	case PauseMsg:
		if msg.Err != nil {
			verb := "Pause"
			if msg.Resume {
				verb = "Resume"
			}
			m.openDialog(newResult(m.st, m.km, verb, []string{msg.Err.Error()}, true))
			return m, nil
		}
		m.dialog = dialog{}
		m.onChange(msg.Progress, m.opts.Now())
		return m, nil
	case RepairPauseMsg:
		if msg.Err != nil {
			verb := "Pause repair"
			if msg.Resume {
				verb = "Resume repair"
			}
			m.openDialog(newResult(m.st, m.km, verb, []string{msg.Err.Error()}, true))
			return m, nil
		}
		m.dialog = dialog{}
		m.onRepair("", msg.Progress, m.opts.Now())
		return m, nil
	case NodeMsg:
		verb, done := "Start", "started"
		if msg.Stop {
			verb, done = "Stop", "stopped"
		}
		if msg.Err != nil {
			m.openDialog(newResult(m.st, m.km, verb+" "+msg.ID, []string{msg.Err.Error()}, true))
			return m, nil
		}
		m.dialog = dialog{}
		m.logEvent(m.opts.Now(), fmt.Sprintf("%s's process %s", msg.ID, done), msg.Stop)
		return m, tea.Batch(m.fetchStatus(), m.fetchRing())
	case BenchMsg:
		if msg.Err != nil {
			m.openDialog(newResult(m.st, m.km, "Bench", []string{msg.Err.Error()}, true))
			return m, nil
		}
		m.dialog = dialog{}
		if msg.Rate > 0 {
			m.logEvent(m.opts.Now(), fmt.Sprintf("bench started at %d req/s", msg.Rate), false)
		} else {
			line := "bench stopped"
			if msg.Result != "" {
				line += ": " + msg.Result
				m.openDialog(newResult(m.st, m.km, fmt.Sprintf("Bench at %d req/s stopped", m.bench), []string{msg.Result}, false))
			}
			m.logEvent(m.opts.Now(), line, false)
		}
		m.bench = msg.Rate
		m.benchChart = ""
		return m, nil
	}
	if m.dialog.kind == dialogInput {
		// The text field's own messages (cursor).
		var cmd tea.Cmd
		m.dialog, cmd = m.dialog.Update(msg)
		return m, cmd
	}
	return m, nil
}

// openDialog shows d, sized to the screen.
func (m *Model) openDialog(d dialog) {
	d.SetSize(m.width, m.bodyHeight())
	m.dialog = d
}

// rows returns the nodes in the overview's sort order.
func (m Model) rows() []*node {
	out := make([]*node, 0, len(m.nodes))
	for _, id := range m.sortedIDs() {
		out = append(out, m.nodes[id])
	}
	key := func(n *node) float64 {
		s := n.stats
		switch m.sortBy {
		case sortOps:
			return s.GetOpsPerSec()
		case sortP99:
			return s.GetP99Ms()
		case sortKeys:
			return float64(s.GetKeys())
		case sortDisk:
			return float64(s.GetDiskBytes())
		case sortShare:
			return n.share
		}
		return 0
	}
	if m.sortBy != sortNode {
		sort.SliceStable(out, func(i, j int) bool { return key(out[i]) > key(out[j]) })
	}
	return out
}

func (m Model) selectedNode() *node {
	if m.view == ScreenHeatmap {
		if id := m.heat.SelectedNode(); id != "" {
			return m.nodes[id]
		}
	}
	rs := m.rows()
	if len(rs) == 0 {
		return nil
	}
	return rs[max(0, min(m.selected, len(rs)-1))]
}

func (m Model) onKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if k.String() == "ctrl+c" {
		return m, tea.Quit
	}
	if m.dialog.open() {
		var cmd tea.Cmd
		m.dialog, cmd = m.dialog.Update(k)
		return m, cmd
	}
	if m.showHelp {
		if key.Matches(k, m.km.Quit) {
			return m, tea.Quit
		}
		m.showHelp = false
		return m, nil
	}
	switch {
	case key.Matches(k, m.km.Quit):
		return m, tea.Quit
	case key.Matches(k, m.km.Help):
		m.showHelp = true
	case key.Matches(k, m.km.NextView):
		m.view = (m.view + 1) % numViews
	case key.Matches(k, m.km.PrevView):
		m.view = (m.view + numViews - 1) % numViews
	case key.Matches(k, m.km.Overview):
		m.view = ScreenOverview
	case key.Matches(k, m.km.Heatmap):
		m.view = ScreenHeatmap
	case key.Matches(k, m.km.Changes):
		m.view = ScreenChanges
	case key.Matches(k, m.km.History):
		m.view = ScreenHistory
	case key.Matches(k, m.km.Sort):
		m.sortBy = (m.sortBy + 1) % numSorts
	case key.Matches(k, m.km.Drain):
		if n := m.selectedNode(); n != nil {
			return m, m.plan(&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REMOVE, NodeId: n.id})
		}
	case key.Matches(k, m.km.Rebalance):
		return m, m.plan(&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REBALANCE})
	case key.Matches(k, m.km.Add):
		if sp := m.spare(); sp != nil {
			// A spare awaits admission: one key plans its add, y starts it (the next a
			// offers the next spare).
			return m, m.plan(&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: sp.ID, GrpcAddr: sp.Addr})
		}
		return m, m.openInput("add", "Add a node", "ID=ADDR of a running, empty node (e.g. n4=127.0.0.1:9094)")
	case key.Matches(k, m.km.StopNode):
		if n := m.selectedNode(); n != nil {
			m.openDialog(newConfirm(m.st, m.km, "Stop "+n.id, []string{
				fmt.Sprintf("Stop node %s's process; its data stays. The others show it DOWN, keep hints for its writes and serve its keys while a quorum answers. X starts it again.", n.id),
			}, m.controlNode(n.id, true)))
		}
	case key.Matches(k, m.km.StartNode):
		if n := m.selectedNode(); n != nil {
			m.openDialog(newConfirm(m.st, m.km, "Start "+n.id, []string{
				fmt.Sprintf("Start node %s's process again on its data: the others hand it the hints they kept, and it shows UP once it serves.", n.id),
			}, m.controlNode(n.id, false)))
		}
	case key.Matches(k, m.km.Bench):
		if m.bench > 0 {
			m.openDialog(newConfirm(m.st, m.km, "Stop bench",
				[]string{fmt.Sprintf("Stop the background bench running at %d req/s.", m.bench)},
				m.stopBench()))
			return m, nil
		}
		return m, m.openInput("bench", "Start a background bench", "rate in requests per second (e.g. 500)")
	case key.Matches(k, m.km.Pause):
		c := m.change
		switch {
		case present.OpenPause(c) != nil:
			m.openDialog(newConfirm(m.st, m.km, fmt.Sprintf("Resume change #%d", c.GetId()), []string{
				fmt.Sprintf("Resume ring change #%d (%s): every receiver goes on pulling from where each range stopped.", c.GetId(), present.Change(c.GetPlan().GetRequest())),
				present.Paused(c, m.opts.Now()),
			}, m.pauseChange(true)))
		case c.GetState() == kvpb.ChangeState_CHANGE_STATE_STREAMING:
			body := []string{fmt.Sprintf("Pause ring change #%d (%s): every receiver stops pulling within a second; what streamed stays. P again resumes it.", c.GetId(), present.Change(c.GetPlan().GetRequest()))}
			if cost := present.PendingCost(c); cost != "" {
				body = append(body, "While paused the change stays in flight: "+cost+".")
			}
			m.openDialog(newConfirm(m.st, m.km, fmt.Sprintf("Pause change #%d", c.GetId()), body, m.pauseChange(false)))
		default:
			m.openDialog(newResult(m.st, m.km, "Pause", []string{"nothing to pause: no ring change is streaming"}, true))
		}
	case key.Matches(k, m.km.PauseRepair):
		m.onRepairPauseKey()
	case key.Matches(k, m.km.Profile):
		if n := m.selectedNode(); n != nil {
			m.openDialog(newConfirm(m.st, m.km, "CPU profile", []string{
				fmt.Sprintf("Capture a %ds CPU profile of node %s (%s),", DefaultProfileSecs, n.id, n.addr),
				"write it to a file and show its top functions.",
			}, m.profile(n.id, n.addr)))
		}
	case m.view == ScreenHeatmap && key.Matches(k, m.km.HotKeys):
		return m, m.fetchVnodeKeys()
	case m.view == ScreenHeatmap:
		var cmd tea.Cmd
		m.heat, cmd = m.heat.Update(k)
		return m, cmd
	case m.view == ScreenHistory:
		return m.onHistoryKey(k)
	case key.Matches(k, m.km.Up):
		m.selected = max(0, m.selected-1)
	case key.Matches(k, m.km.Down):
		m.selected = min(len(m.nodes)-1, m.selected+1)
	}
	return m, nil
}

// spare returns the first spare node not in the cluster yet, nil if none.
func (m Model) spare() *Spare {
	for i, sp := range m.opts.Spares {
		if _, member := m.nodes[sp.ID]; !member {
			return &m.opts.Spares[i]
		}
	}
	return nil
}

func (m *Model) openInput(what, title, prompt string) tea.Cmd {
	d, cmd := newInput(m.st, m.km, what, title, prompt)
	m.openDialog(d)
	return cmd
}

// submitInput acts on what was typed into the input dialog: plans an add, or asks to
// confirm a bench; a malformed answer stays in the dialog with what is wanted.
func (m Model) submitInput(in inputMsg) (tea.Model, tea.Cmd) {
	if m.dialog.kind != dialogInput || m.dialog.input != in.what {
		return m, nil // the dialog was closed meanwhile
	}
	switch in.what {
	case "add":
		id, addr, ok := strings.Cut(in.value, "=")
		if !ok || id == "" || addr == "" {
			m.dialog.body = []string{"want ID=ADDR, e.g. n4=127.0.0.1:9094"}
			m.dialog.err = true
			return m, nil
		}
		m.dialog = dialog{}
		return m, m.plan(&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: id, GrpcAddr: addr})
	case "bench":
		rate, err := strconv.Atoi(in.value)
		if err != nil || rate <= 0 {
			m.dialog.body = []string{"want a positive rate in requests per second"}
			m.dialog.err = true
			return m, nil
		}
		m.openDialog(newConfirm(m.st, m.km, "Start bench",
			[]string{fmt.Sprintf("Start a background bench at %d req/s against the cluster.", rate), "Press b again to stop it."},
			m.startBench(rate)))
	}
	return m, nil
}

// onPlan shows a dry-run plan: to confirm, or as a result when it is refused or moves nothing.
func (m *Model) onPlan(msg PlanMsg) {
	title := "Plan: " + present.Change(msg.Req)
	if msg.Err != nil {
		m.openDialog(newResult(m.st, m.km, title, []string{msg.Err.Error()}, true))
		return
	}
	body := []string{present.WhatHappens(msg.Req), ""}
	body = append(body, present.PlanLines(msg.Plan)...)
	if msg.Req.GetKind() == kvpb.ChangeRequest_REBALANCE && len(msg.Plan.GetRequest().GetTokenMoves()) == 0 {
		m.openDialog(newResult(m.st, m.km, title+" — nothing to move", body, false))
		return
	}
	if len(msg.Plan.GetRefusals()) > 0 {
		m.openDialog(newResult(m.st, m.km, title+" — refused", body, true))
		return
	}
	body = append(body, "", "Start this change?")
	req := msg.Req
	if len(msg.Plan.GetRequest().GetTokenMoves()) > 0 {
		req = msg.Plan.GetRequest() // a rebalance starts the vnode moves shown, not a fresh choice
	}
	m.openDialog(newConfirm(m.st, m.km, title, body, m.startChange(req)))
}

// onRepairPauseKey opens the confirmation of R: resume when a repair session is paused, else
// pause the sessions in flight; with none, says so.
func (m *Model) onRepairPauseKey() {
	var paused, running *kvpb.RepairProgress
	for _, p := range m.repairsInFlight() {
		if p.GetPaused() != nil && paused == nil {
			paused = p
		} else if running == nil {
			running = p
		}
	}
	switch {
	case paused != nil:
		m.openDialog(newConfirm(m.st, m.km, "Resume repair", []string{
			fmt.Sprintf("Resume repair: session #%d on %s goes on from the ranges it has done.", paused.GetId(), paused.GetCoordinator()),
			present.RepairPaused(paused, m.opts.Now()),
		}, m.pauseRepair(true)))
	case running != nil:
		m.openDialog(newConfirm(m.st, m.km, "Pause repair", []string{
			fmt.Sprintf("Pause repair: session #%d on %s stops within a second and keeps the ranges it has done; new sessions wait too. R again resumes it.",
				running.GetId(), running.GetCoordinator()),
		}, m.pauseRepair(false)))
	default:
		m.openDialog(newResult(m.st, m.km, "Pause repair", []string{"nothing to pause: no repair is running"}, true))
	}
}
