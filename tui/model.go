// Package tui is ringkv's console: a live node table, a shard heatmap, ring changes in flight
// and operator actions, drawn with bubbletea v2. Data comes from a Source, actions go through
// an Actions; both are injected through Options.
package tui

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

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

// Messages. Every RPC runs in a tea.Cmd that returns one of these.
type (
	// StatusMsg carries an Admin Status answer.
	StatusMsg struct {
		Resp *kvpb.StatusResponse
		Err  error
	}
	// RingMsg carries an Admin Ring answer.
	RingMsg struct {
		Resp *kvpb.RingResponse
		Err  error
	}
	// StatsMsg is one node's stats sample.
	StatsMsg struct{ Stats *kvpb.NodeStats }
	// ChangeMsg is a progress report of the ring change in flight.
	ChangeMsg struct{ Progress *kvpb.ChangeProgress }
	// TickMsg re-checks the per-node deadlines.
	TickMsg struct{}
	// RefreshMsg asks for Status and Ring again.
	RefreshMsg struct{}
	// PlanMsg is a dry-run plan, to be confirmed.
	PlanMsg struct {
		Req  *kvpb.ChangeRequest
		Plan *kvpb.ChangePlan
		Err  error
	}
	// ChangeStartedMsg answers a confirmed StartChange.
	ChangeStartedMsg struct {
		Plan *kvpb.ChangePlan
		Err  error
	}
	// ProfileMsg answers a CPU profile capture.
	ProfileMsg struct {
		Node   string
		Result ProfileResult
		Err    error
	}
	// BenchMsg answers a bench start (Rate > 0) or stop.
	BenchMsg struct {
		Rate int
		Err  error
	}
	// sourceClosedMsg: a source stream ended.
	sourceClosedMsg struct{ what string }
)

// Screen is one of the console's views.
type Screen int

// The views, in tab order.
const (
	ScreenOverview Screen = iota
	ScreenHeatmap
	ScreenChanges
	numViews
)

var viewNames = [...]string{"1 overview", "2 heatmap", "3 changes"}

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

type node struct {
	id, addr string
	state    string // from Status / ring
	stats    *kvpb.NodeStats
	lastSeen time.Time // zero: never
	down     bool
	share    float64
	vnodes   int
	spark    []float64
	sparkAt  time.Time // when the last sparkline point began
}

type event struct {
	at   time.Time
	text string
	bad  bool
}

type dialogKind int

const (
	dialogNone dialogKind = iota
	dialogInput
	dialogConfirm
	dialogBusy
	dialogResult
)

type dialog struct {
	kind  dialogKind
	title string
	body  []string
	// input: what the text is for ("add", "bench").
	input string
	// confirm: the command run on yes.
	onYes tea.Cmd
	err   bool
}

// Model is the console's root model.
type Model struct {
	opts   Options
	st     styles.Styles
	km     keys.KeyMap
	help   help.Model
	heat   heatmap.Model
	text   lineInput
	width  int
	height int

	view     Screen
	showHelp bool
	sortBy   sortCol
	selected int // index into the sorted node rows

	started  time.Time
	nodes    map[string]*node
	epoch    uint64
	replicas uint32
	ring     *kvpb.RingState
	ringIdx  ringIdx // of ring
	change   *kvpb.ChangeProgress
	events   []event
	lastErr  string
	bench    int // running bench rate, 0 = none
	dialog   dialog
}

// New returns the console's model on opts.
func New(opts Options) Model {
	opts.defaults()
	st := styles.DefaultStyles()
	km := keys.DefaultKeyMap()
	km.SetReadonly(opts.Readonly)
	h := help.New()
	h.Styles = st.Help
	m := Model{
		opts:    opts,
		st:      st,
		km:      km,
		help:    h,
		heat:    heatmap.New(st, km),
		width:   80,
		height:  24,
		started: opts.Now(),
		nodes:   map[string]*node{},
		view:    max(0, min(opts.Start, numViews-1)),
	}
	m.resize()
	return m
}

// Init fetches status and ring, and starts receiving the streams and the tick.
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.fetchStatus(), m.fetchRing(), m.recvStats(), m.recvChange(), m.tick())
}

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

func (m *Model) logEvent(text string, bad bool) {
	m.events = append(m.events, event{at: m.opts.Now(), text: text, bad: bad})
	if len(m.events) > maxEvents {
		m.events = m.events[len(m.events)-maxEvents:]
	}
}

func (m *Model) node(id string) *node {
	n, ok := m.nodes[id]
	if !ok {
		n = &node{id: id}
		m.nodes[id] = n
	}
	return n
}

func (m *Model) resize() {
	m.help.SetWidth(m.width)
	m.heat.SetSize(m.width, m.bodyHeight())
}

// Update handles one message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.resize()
		return m, nil
	case tea.KeyPressMsg:
		return m.onKey(msg)
	case StatusMsg:
		m.onStatus(msg)
		return m, nil
	case RingMsg:
		m.onRing(msg)
		return m, m.refresh()
	case RefreshMsg:
		return m, tea.Batch(m.fetchStatus(), m.fetchRing())
	case StatsMsg:
		m.onStats(msg.Stats)
		return m, m.recvStats()
	case ChangeMsg:
		m.onChange(msg.Progress)
		return m, m.recvChange()
	case sourceClosedMsg:
		return m, nil
	case TickMsg:
		m.checkDeadlines()
		return m, m.tick()
	case PlanMsg:
		m.onPlan(msg)
		return m, nil
	case ChangeStartedMsg:
		if msg.Err != nil {
			m.dialog = dialog{kind: dialogResult, title: "Change refused", body: []string{msg.Err.Error()}, err: true}
			return m, nil
		}
		m.dialog = dialog{}
		m.logEvent(fmt.Sprintf("change #%d started: %s", msg.Plan.GetId(), present.Change(msg.Plan.GetRequest())), false)
		m.view = ScreenChanges
		return m, nil
	case ProfileMsg:
		if msg.Err != nil {
			m.dialog = dialog{kind: dialogResult, title: "CPU profile of " + msg.Node, body: []string{msg.Err.Error()}, err: true}
			return m, nil
		}
		body := append([]string{"wrote " + msg.Result.Path, "", "top functions (flat):"}, msg.Result.Top...)
		m.dialog = dialog{kind: dialogResult, title: "CPU profile of " + msg.Node, body: body}
		return m, nil
	case BenchMsg:
		if msg.Err != nil {
			m.dialog = dialog{kind: dialogResult, title: "Bench", body: []string{msg.Err.Error()}, err: true}
			return m, nil
		}
		m.dialog = dialog{}
		m.bench = msg.Rate
		if msg.Rate > 0 {
			m.logEvent(fmt.Sprintf("bench started at %d req/s", msg.Rate), false)
		} else {
			m.logEvent("bench stopped", false)
		}
		return m, nil
	}
	return m, nil
}

func (m *Model) onStatus(msg StatusMsg) {
	if msg.Err != nil {
		m.lastErr = "status: " + msg.Err.Error()
		return
	}
	m.lastErr = ""
	r := msg.Resp
	m.setEpoch(r.GetEpoch())
	m.replicas = r.GetReplicas()
	for _, ns := range r.GetNodes() {
		n := m.node(ns.GetId())
		n.addr = ns.GetGrpcAddr()
		n.state = ns.GetState()
	}
	if c := r.GetChange(); c != nil {
		m.onChange(c)
	}
}

func (m *Model) setEpoch(e uint64) {
	if e == 0 || e == m.epoch {
		return
	}
	if m.epoch != 0 {
		m.logEvent(fmt.Sprintf("ring epoch %d → %d", m.epoch, e), false)
	}
	m.epoch = e
}

func (m *Model) onRing(msg RingMsg) {
	if msg.Err != nil {
		m.lastErr = "ring: " + msg.Err.Error()
		return
	}
	r := msg.Resp
	m.ring = r.GetRing()
	m.ringIdx = ringIndex(m.ring)
	m.setEpoch(m.ring.GetEpoch())
	if m.ring.GetReplicas() != 0 {
		m.replicas = m.ring.GetReplicas()
	}
	for _, mem := range m.ring.GetMembers() {
		n := m.node(mem.GetId())
		if n.addr == "" {
			n.addr = mem.GetGrpcAddr()
		}
		if n.state == "" {
			n.state = mem.GetState()
		}
		n.vnodes = len(mem.GetTokens())
	}
	for _, o := range r.GetOwnership() {
		m.node(o.GetId()).share = o.GetShare()
	}
	if c := r.GetChange(); c != nil {
		m.onChange(c)
	}
	m.heat.SetRows(m.heatRows())
}

func (m *Model) onStats(s *kvpb.NodeStats) {
	if s == nil || s.GetId() == "" {
		return
	}
	n := m.node(s.GetId())
	n.stats = s
	n.lastSeen = m.opts.Now()
	if n.down {
		n.down = false
		m.logEvent(fmt.Sprintf("node %s up", n.id), false)
	}
	// One sparkline point a second (the stream samples faster), so the column is a minute;
	// samples without a time (test scripts) are a point each.
	at := time.Unix(0, s.GetUnixNanos())
	if s.GetUnixNanos() != 0 && len(n.spark) > 0 && at.Sub(n.sparkAt) < time.Second {
		n.spark[len(n.spark)-1] = s.GetOpsPerSec()
	} else {
		n.spark = append(n.spark, s.GetOpsPerSec())
		n.sparkAt = at
	}
	if len(n.spark) > sparkSamples {
		n.spark = n.spark[len(n.spark)-sparkSamples:]
	}
	m.setEpoch(s.GetEpoch())
	m.heat.SetRows(m.heatRows())
}

func (m *Model) onChange(p *kvpb.ChangeProgress) {
	if p == nil {
		return
	}
	old := m.change
	if old == nil || old.GetId() != p.GetId() || old.GetState() != p.GetState() {
		if !present.NoChange(p) {
			m.logEvent(fmt.Sprintf("change #%d %s: %s", p.GetId(), present.State(p.GetState()), present.Change(p.GetPlan().GetRequest())), p.GetState() == "failed")
		}
	}
	m.change = p
}

// checkDeadlines turns a node DOWN when its last stats sample is older than DownAfter.
func (m *Model) checkDeadlines() {
	now := m.opts.Now()
	for _, id := range m.sortedIDs() {
		n := m.nodes[id]
		seen := n.lastSeen
		if seen.IsZero() {
			seen = m.started
		}
		if !n.down && now.Sub(seen) > m.opts.DownAfter {
			n.down = true
			m.logEvent(fmt.Sprintf("node %s down (no stats for %s)", n.id, now.Sub(seen).Truncate(100*time.Millisecond)), true)
			m.heat.SetRows(m.heatRows())
		}
	}
}

func (m Model) sortedIDs() []string {
	ids := make([]string, 0, len(m.nodes))
	for id := range m.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
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

func (n *node) displayState() string {
	switch {
	case n.down:
		return "DOWN"
	case n.state != "":
		return n.state
	case n.stats.GetState() != "":
		return n.stats.GetState()
	}
	return "UP"
}

// heatRows builds the heatmap's rows from the ring: a row per member with the vnodes it owns
// (its tokens; the vnode ending at token t is the range (previous token, t]) in token order.
// A cell's load combines what every node that answered reports for that range: reads and
// writes summed over the replicas, keys and bytes from the owner (the largest report when the
// owner is down or silent). So a hot range lights up once, in the row of the node that owns it.
func (m Model) heatRows() []heatmap.Row {
	owners := m.ringIdx
	if len(owners.tokens) == 0 {
		return nil
	}
	type load struct {
		reads, writes float64
		keys, bytes   uint64 // the owner's
		maxKeys       uint64 // the largest report
		maxBytes      uint64
		owner         bool
	}
	loads := make(map[uint64]*load, len(owners.tokens))
	for _, id := range m.sortedIDs() {
		n := m.nodes[id]
		if n.down {
			continue
		}
		for _, v := range n.stats.GetVnodes() {
			l := loads[v.GetToken()]
			if l == nil {
				l = &load{}
				loads[v.GetToken()] = l
			}
			l.reads += v.GetReads_1S()
			l.writes += v.GetWrites_1S()
			l.maxKeys = max(l.maxKeys, v.GetKeys())
			l.maxBytes = max(l.maxBytes, v.GetBytes())
			if owners.ownerOf(v.GetToken()) == id {
				l.keys, l.bytes, l.owner = v.GetKeys(), v.GetBytes(), true
			}
		}
	}
	var rows []heatmap.Row
	for _, id := range m.sortedIDs() {
		n := m.nodes[id]
		row := heatmap.Row{Node: id, Down: n.down}
		for _, t := range owners.tokensOf(id) {
			c := heatmap.Cell{Node: id, Start: owners.prev(t), End: t, Replicas: owners.replicas(t, int(m.replicas))}
			if l := loads[t]; l != nil {
				c.Reads, c.Writes = l.reads, l.writes
				c.Keys, c.Bytes = l.keys, l.bytes
				if !l.owner {
					c.Keys, c.Bytes = l.maxKeys, l.maxBytes
				}
			}
			row.Cells = append(row.Cells, c)
		}
		if len(row.Cells) > 0 {
			rows = append(rows, row)
		}
	}
	return rows
}

func (m Model) onKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if k.String() == "ctrl+c" {
		return m, tea.Quit
	}
	switch m.dialog.kind {
	case dialogInput:
		switch {
		case k.String() == "esc":
			m.dialog = dialog{}
			return m, nil
		case k.String() == "enter":
			return m.submitInput()
		}
		m.text = m.text.update(k)
		return m, nil
	case dialogConfirm:
		switch {
		case key.Matches(k, m.km.Confirm):
			cmd := m.dialog.onYes
			m.dialog = dialog{kind: dialogBusy, title: m.dialog.title, body: []string{"working…"}}
			return m, cmd
		case key.Matches(k, m.km.Cancel), key.Matches(k, m.km.Quit):
			m.dialog = dialog{}
		}
		return m, nil
	case dialogBusy:
		return m, nil
	case dialogResult:
		m.dialog = dialog{}
		return m, nil
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
	case key.Matches(k, m.km.Sort):
		m.sortBy = (m.sortBy + 1) % numSorts
	case key.Matches(k, m.km.Drain):
		if n := m.selectedNode(); n != nil {
			return m, m.plan(&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REMOVE, NodeId: n.id})
		}
	case key.Matches(k, m.km.Rebalance):
		return m, m.plan(&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REBALANCE})
	case key.Matches(k, m.km.Add):
		m.openInput("add", "Add a node", "ID=ADDR of a running, empty node (e.g. n4=127.0.0.1:9094)")
	case key.Matches(k, m.km.Bench):
		if m.bench > 0 {
			m.dialog = dialog{kind: dialogConfirm, title: "Stop bench",
				body:  []string{fmt.Sprintf("Stop the background bench running at %d req/s.", m.bench)},
				onYes: m.stopBench()}
			return m, nil
		}
		m.openInput("bench", "Start a background bench", "rate in requests per second (e.g. 500)")
	case key.Matches(k, m.km.Profile):
		if n := m.selectedNode(); n != nil {
			m.dialog = dialog{kind: dialogConfirm, title: "CPU profile",
				body: []string{
					fmt.Sprintf("Capture a %ds CPU profile of node %s (%s),", DefaultProfileSecs, n.id, n.addr),
					"write it to a file and show its top functions.",
				},
				onYes: m.profile(n.id, n.addr)}
		}
	case m.view == ScreenHeatmap:
		var cmd tea.Cmd
		m.heat, cmd = m.heat.Update(k)
		return m, cmd
	case key.Matches(k, m.km.Up):
		m.selected = max(0, m.selected-1)
	case key.Matches(k, m.km.Down):
		m.selected = min(len(m.nodes)-1, m.selected+1)
	}
	return m, nil
}

func (m *Model) openInput(what, title, prompt string) {
	m.text = lineInput{}
	m.dialog = dialog{kind: dialogInput, title: title, body: []string{prompt}, input: what}
}

func (m Model) submitInput() (tea.Model, tea.Cmd) {
	v := strings.TrimSpace(m.text.value)
	switch m.dialog.input {
	case "add":
		id, addr, ok := strings.Cut(v, "=")
		if !ok || id == "" || addr == "" {
			m.dialog.body = []string{"want ID=ADDR, e.g. n4=127.0.0.1:9094"}
			m.dialog.err = true
			return m, nil
		}
		m.dialog = dialog{}
		return m, m.plan(&kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: id, GrpcAddr: addr})
	case "bench":
		rate, err := strconv.Atoi(v)
		if err != nil || rate <= 0 {
			m.dialog.body = []string{"want a positive rate in requests per second"}
			m.dialog.err = true
			return m, nil
		}
		m.dialog = dialog{kind: dialogConfirm, title: "Start bench",
			body:  []string{fmt.Sprintf("Start a background bench at %d req/s against the cluster.", rate), "Press b again to stop it."},
			onYes: m.startBench(rate)}
	}
	return m, nil
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

func (m *Model) onPlan(msg PlanMsg) {
	title := "Plan: " + present.Change(msg.Req)
	if msg.Err != nil {
		m.dialog = dialog{kind: dialogResult, title: title, body: []string{msg.Err.Error()}, err: true}
		return
	}
	body := []string{whatHappens(msg.Req), ""}
	body = append(body, planLines(msg.Plan)...)
	if msg.Req.GetKind() == kvpb.ChangeRequest_REBALANCE && len(msg.Plan.GetRequest().GetTokenMoves()) == 0 {
		m.dialog = dialog{kind: dialogResult, title: title + " — nothing to move", body: body}
		return
	}
	if len(msg.Plan.GetRefusals()) > 0 {
		m.dialog = dialog{kind: dialogResult, title: title + " — refused", body: body, err: true}
		return
	}
	body = append(body, "", "Start this change?")
	a, req := m.opts.Actions, msg.Req
	if len(msg.Plan.GetRequest().GetTokenMoves()) > 0 {
		req = msg.Plan.GetRequest() // a rebalance starts the vnode moves shown, not a fresh choice
	}
	m.dialog = dialog{kind: dialogConfirm, title: title, body: body, onYes: func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultRPCTimeout*3)
		defer cancel()
		p, err := a.StartChange(ctx, req)
		return ChangeStartedMsg{Plan: p, Err: err}
	}}
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

func whatHappens(r *kvpb.ChangeRequest) string {
	switch r.GetKind() {
	case kvpb.ChangeRequest_ADD:
		return fmt.Sprintf("Node %s at %s joins the ring and streams its new ranges in.", r.GetNodeId(), r.GetGrpcAddr())
	case kvpb.ChangeRequest_REMOVE:
		return fmt.Sprintf("Node %s streams its ranges to the new owners, then leaves the ring.", r.GetNodeId())
	case kvpb.ChangeRequest_REBALANCE:
		return "Vnodes move away from hot nodes by measured load."
	}
	return ""
}

func planLines(p *kvpb.ChangePlan) []string {
	lines := []string{fmt.Sprintf("epoch %d → %d, %d range moves, ~%s keys, ~%s",
		p.GetFromEpoch(), p.GetToEpoch(), len(p.GetMoves()),
		heatmap.FormatCount(float64(p.GetEstKeys())), present.BytesShort(float64(p.GetEstBytes())))}
	after := map[string]*kvpb.NodeOwnership{}
	for _, o := range p.GetAfter() {
		after[o.GetId()] = o
	}
	rebalance := p.GetRequest().GetKind() == kvpb.ChangeRequest_REBALANCE
	for _, b := range p.GetBefore() {
		a := after[b.GetId()]
		line := fmt.Sprintf("  %-10s share %5.1f%% → %5.1f%%  vnodes %d → %d",
			b.GetId(), b.GetShare()*100, a.GetShare()*100, b.GetVnodes(), a.GetVnodes())
		if rebalance {
			line += fmt.Sprintf("  load %.0f → %.0f op/s", b.GetLoad(), a.GetLoad())
		}
		lines = append(lines, line)
	}
	for _, o := range p.GetAfter() {
		found := false
		for _, b := range p.GetBefore() {
			found = found || b.GetId() == o.GetId()
		}
		if !found {
			lines = append(lines, fmt.Sprintf("  %-10s share   new → %5.1f%%  vnodes 0 → %d", o.GetId(), o.GetShare()*100, o.GetVnodes()))
		}
	}
	for _, w := range p.GetWarnings() {
		lines = append(lines, "warning: "+w)
	}
	for _, r := range p.GetRefusals() {
		lines = append(lines, "refused: "+r)
	}
	return lines
}
