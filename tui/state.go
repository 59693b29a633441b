package tui

import (
	"fmt"
	"slices"
	"sort"
	"time"

	tea "charm.land/bubbletea/v2"

	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
	"ringkv/tui/heatmap"
)

// clusterState is what the console knows of the cluster: the nodes and their last samples,
// the ring, the change in flight and the event log. apply is its reducer: the source's
// messages in, the state out; it does no I/O, reads no clock (now is passed in) and draws
// nothing, so tests drive it with tables and no terminal.
type clusterState struct {
	started   time.Time
	downAfter time.Duration

	nodes    map[string]*node
	epoch    uint64
	replicas uint32
	ring     *kvpb.RingState
	ringIdx  ringIdx // of ring
	change   *kvpb.ChangeProgress
	// repairs are the repair sessions by coordinator: each node's in flight, else its last
	// one (from Status: the nodes' NodeInfo.repair and StatusResponse.repairs).
	repairs  map[string]*kvpb.RepairProgress
	statusAt time.Time // when the last status (and so the repairs) arrived
	events   []event
	lastErr  string
}

func newClusterState(started time.Time, downAfter time.Duration) clusterState {
	return clusterState{started: started, downAfter: downAfter, nodes: map[string]*node{}, repairs: map[string]*kvpb.RepairProgress{}}
}

// apply folds one message of the source into the state at now: StatusMsg, RingMsg,
// StatsMsg, ChangeMsg, TickMsg (which turns silent nodes DOWN); other messages are ignored.
// It tells whether the heatmap's rows (heatRows) changed.
func (m *clusterState) apply(msg tea.Msg, now time.Time) (rowsChanged bool) {
	switch msg := msg.(type) {
	case StatusMsg:
		m.onStatus(msg, now)
	case RingMsg:
		return m.onRing(msg, now)
	case StatsMsg:
		return m.onStats(msg.Stats, now)
	case ChangeMsg:
		m.onChange(msg.Progress, now)
	case TickMsg:
		return m.checkDeadlines(now)
	}
	return false
}

type node struct {
	id, addr string
	state    kvpb.NodeState // from Status / ring
	stats    *kvpb.NodeStats
	diskFull string    // why its disk is full, from Status; "" when it is not
	gray     string    // what is wrong with it when it answers but badly (kvpb.GrayLine), from Status
	backAt   time.Time // when it last came back after going away, as its peers noted it (present.Restarts)
	lastSeen time.Time // zero: never
	known    time.Time // when the console first heard of it
	down     bool
	share    float64
	vnodes   int
	errRates map[string]float64 // errors/s by kind, between the last two samples
	spark    []float64
	sparkAt  time.Time // when the last sparkline point began
}

type event struct {
	at   time.Time
	text string
	bad  bool
}

// logEvent adds a line to the event log at the time it happened (which may be before
// events already logged: a change reports when it finished), keeping the log in time order
// and its last maxEvents.
func (m *clusterState) logEvent(at time.Time, text string, bad bool) {
	i := len(m.events)
	for i > 0 && m.events[i-1].at.After(at) {
		i--
	}
	m.events = slices.Insert(m.events, i, event{at: at, text: text, bad: bad})
	if len(m.events) > maxEvents {
		m.events = m.events[len(m.events)-maxEvents:]
	}
}

// member tells whether id is a member of the ring last read; before any ring is read,
// every node the source names is.
func (m *clusterState) member(id string) bool {
	if m.ring == nil {
		return true
	}
	for _, mem := range m.ring.GetMembers() {
		if mem.GetId() == id {
			return true
		}
	}
	return false
}

func (m *clusterState) node(id string, now time.Time) *node {
	n, ok := m.nodes[id]
	if !ok {
		n = &node{id: id, known: now}
		m.nodes[id] = n
	}
	return n
}

// sameComeback is how far apart two Statuses may place a node's comeback and still mean
// the same one. The peers' sightings differ by a second or so; two comebacks noted apart
// are further apart than that (sooner, the node is named flapping and not noted).
const sameComeback = 5 * time.Second

func (m *clusterState) onStatus(msg StatusMsg, now time.Time) {
	if msg.Err != nil {
		m.lastErr = "status: " + msg.Err.Error()
		return
	}
	m.lastErr = ""
	m.statusAt = now
	r := msg.Resp
	m.setEpoch(r.GetEpoch(), now)
	m.replicas = r.GetReplicas()
	gray := map[string]string{}
	grays := present.Gray(r.GetNodes())
	for _, g := range grays {
		gray[g.GetNode()] = kvpb.GrayLine(g)
	}
	restarts := map[string]present.Restart{}
	for _, rs := range present.Restarts(r.GetNodes(), grays) {
		restarts[rs.Node] = rs
	}
	for _, ns := range r.GetNodes() {
		if !m.member(ns.GetId()) {
			continue // it left the ring after the status was read
		}
		n := m.node(ns.GetId(), now)
		if (n.gray != "") != (gray[n.id] != "") {
			if gray[n.id] != "" {
				m.logEvent(now, present.GrayEvent(n.id, gray[n.id]), true)
			} else {
				m.logEvent(now, present.GrayEvent(n.id, ""), false)
			}
		}
		n.gray = gray[ns.GetId()]
		if rs, ok := restarts[n.id]; ok {
			// Logged once per comeback: its peers' sightings of one differ by a second or so.
			if back := now.Add(-rs.Ago); n.backAt.IsZero() || back.Sub(n.backAt) > sameComeback {
				m.logEvent(now, rs.Line(), false)
				n.backAt = back
			}
		}
		n.addr = ns.GetGrpcAddr()
		n.state = ns.GetState()
		if info := ns.GetInfo(); info != nil {
			was := n.diskFull
			n.diskFull = info.GetDiskFull()
			if (was != "") != (n.diskFull != "") { // logged as it fills and as it has room again
				m.logEvent(now, present.DiskFullEvent(n.id, n.diskFull), n.diskFull != "")
			}
		}
	}
	if c := r.GetChange(); c != nil {
		m.onChange(c, now)
	}
	for _, ns := range r.GetNodes() {
		if p := ns.GetInfo().GetRepair(); p != nil {
			m.onRepair(ns.GetId(), p, now)
		}
	}
	for _, p := range r.GetRepairs() {
		m.onRepair(p.GetCoordinator(), p, now)
	}
}

// onRepair folds in the session coordinated by coord. A session seen to start, and one seen
// running that then ends, are logged; one first seen finished (a node's last repair, perhaps
// hours old) is not.
func (m *clusterState) onRepair(coord string, p *kvpb.RepairProgress, now time.Time) {
	if p.GetId() == 0 || p.GetState() == kvpb.RepairState_REPAIR_STATE_NONE {
		return
	}
	if coord == "" {
		coord = p.GetCoordinator()
	}
	old := m.repairs[coord]
	if old != nil && old.GetId() == p.GetId() && old.GetState().Finished() && !p.GetState().Finished() {
		return // a stale report: a session that ended does not run again
	}
	if old != nil && old.GetId() == p.GetId() && old.GetState() == p.GetState() {
		switch op, np := old.GetPaused(), p.GetPaused(); {
		case op == nil && np != nil:
			m.logEvent(time.Unix(np.GetPausedUnix(), 0), fmt.Sprintf("repair #%d on %s %s", p.GetId(), coord, present.RepairPaused(p, now)), true)
		case op != nil && np == nil:
			m.logEvent(now, fmt.Sprintf("repair #%d on %s resumed", p.GetId(), coord), false)
		}
		m.repairs[coord] = p
		return
	}
	seenRunning := old != nil && old.GetId() == p.GetId() && old.GetState().InFlight()
	switch {
	case p.GetState().InFlight():
		at := now
		if p.GetStartedUnix() > 0 {
			at = time.Unix(p.GetStartedUnix(), 0)
		}
		m.logEvent(at, fmt.Sprintf("repair #%d on %s %s: %s", p.GetId(), coord, present.RepairState(p.GetState()), present.Repair(p.GetPlan().GetRequest())), false)
	case p.GetState().Finished() && seenRunning:
		at := now
		if p.GetFinishedUnix() > 0 {
			at = time.Unix(p.GetFinishedUnix(), 0)
		}
		m.logEvent(at, fmt.Sprintf("repair #%d on %s %s: %s, %d keys repaired", p.GetId(), coord, present.RepairState(p.GetState()),
			present.Repair(p.GetPlan().GetRequest()), p.GetKeysStreamed()), p.GetState() != kvpb.RepairState_REPAIR_STATE_DONE)
	}
	m.repairs[coord] = p
}

// repairETA is how long session p has left: as its coordinator estimates, else from the
// ranges done so far since it started (0: unknown).
func (m *clusterState) repairETA(p *kvpb.RepairProgress) time.Duration {
	if e := p.GetEtaSeconds(); e > 0 {
		return time.Duration(e * float64(time.Second))
	}
	done, total := present.RepairRanges(p)
	start := time.Unix(p.GetStartedUnix(), 0)
	if done == 0 || total <= done || p.GetStartedUnix() <= 0 || !m.statusAt.After(start) {
		return 0
	}
	return time.Duration(float64(m.statusAt.Sub(start)) * float64(total-done) / float64(done))
}

// repairsInFlight are the sessions running, by coordinator.
func (m *clusterState) repairsInFlight() []*kvpb.RepairProgress {
	var out []*kvpb.RepairProgress
	coords := make([]string, 0, len(m.repairs))
	for c := range m.repairs {
		coords = append(coords, c)
	}
	sort.Strings(coords)
	for _, c := range coords {
		if p := m.repairs[c]; present.RepairInFlight(p) {
			out = append(out, p)
		}
	}
	return out
}

func (m *clusterState) setEpoch(e uint64, now time.Time) {
	if e == 0 || e == m.epoch {
		return
	}
	if m.epoch != 0 {
		m.logEvent(now, fmt.Sprintf("ring epoch %d → %d", m.epoch, e), false)
	}
	m.epoch = e
}

func (m *clusterState) onRing(msg RingMsg, now time.Time) bool {
	if msg.Err != nil {
		m.lastErr = "ring: " + msg.Err.Error()
		return false
	}
	r := msg.Resp
	m.ring = r.GetRing()
	m.ringIdx = ringIndex(m.ring)
	m.setEpoch(m.ring.GetEpoch(), now)
	if m.ring.GetReplicas() != 0 {
		m.replicas = m.ring.GetReplicas()
	}
	// The node list follows the ring: a node that left it (drained, removed) is dropped,
	// with its share and samples, and the others take the ring's state and share.
	for id := range m.nodes {
		if !m.member(id) {
			delete(m.nodes, id)
			m.logEvent(now, fmt.Sprintf("node %s left the ring", id), false)
		}
	}
	for _, mem := range m.ring.GetMembers() {
		n := m.node(mem.GetId(), now)
		if n.addr == "" {
			n.addr = mem.GetGrpcAddr()
		}
		if mem.GetState() != kvpb.NodeState_NODE_STATE_UNSPECIFIED {
			n.state = mem.GetState()
		}
		n.vnodes = len(mem.GetTokens())
		n.share = 0
	}
	for _, o := range r.GetOwnership() {
		if m.member(o.GetId()) {
			m.node(o.GetId(), now).share = o.GetShare()
		}
	}
	if c := r.GetChange(); c != nil {
		m.onChange(c, now)
	}
	return true
}

func (m *clusterState) onStats(s *kvpb.NodeStats, now time.Time) bool {
	if s == nil || s.GetId() == "" {
		return false
	}
	if !m.member(s.GetId()) {
		return false // a node that left the ring still streams until it stops
	}
	n := m.node(s.GetId(), now)
	n.errRates = errRates(n.stats, s)
	n.stats = s
	n.lastSeen = now
	if n.down {
		n.down = false
		at := now
		if s.GetUnixNanos() != 0 {
			at = time.Unix(0, s.GetUnixNanos()) // when the node sampled it, not when it arrived
		}
		m.logEvent(at, fmt.Sprintf("node %s up", n.id), false)
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
	m.setEpoch(s.GetEpoch(), now)
	return true
}

// errRates is the errors per second by kind between two samples of a node (the samples
// carry counts since the node started); nil when there is no earlier sample, no time between
// them, or the node restarted (a count went down).
func errRates(prev, cur *kvpb.NodeStats) map[string]float64 {
	dt := time.Duration(cur.GetUnixNanos() - prev.GetUnixNanos()).Seconds()
	if prev == nil || prev.GetUnixNanos() == 0 || dt <= 0 {
		return nil
	}
	out := map[string]float64{}
	for kind, n := range cur.GetErrors() {
		p := prev.GetErrors()[kind]
		if n < p {
			return nil
		}
		if n > p {
			out[kind] = float64(n-p) / dt
		}
	}
	return out
}

// errRate is the node's errors per second, all kinds.
func (n *node) errRate() float64 {
	var sum float64
	for _, r := range n.errRates {
		sum += r
	}
	return sum
}

func (m *clusterState) onChange(p *kvpb.ChangeProgress, now time.Time) {
	if p == nil {
		return
	}
	old := m.change
	if old == nil || old.GetId() != p.GetId() || old.GetState() != p.GetState() {
		// Stamped when it happened where the cluster says: a change that finished while the
		// console was not looking is logged at its end, one first seen at its start.
		at := now
		switch {
		case p.GetState().Finished() && p.GetFinishedUnix() > 0:
			at = time.Unix(p.GetFinishedUnix(), 0)
		case (old == nil || old.GetId() != p.GetId()) && p.GetStartedUnix() > 0:
			at = time.Unix(p.GetStartedUnix(), 0)
		}
		state := present.State(p.GetState())
		ps := p.GetPauses()
		switch {
		case present.OpenPause(p) != nil:
			// Paused: when and by whom the cluster journaled it.
			at, state = time.Unix(ps[len(ps)-1].GetPausedUnix(), 0), "PAUSED by "+ps[len(ps)-1].GetBy()
		case old.GetState() == kvpb.ChangeState_CHANGE_STATE_PAUSED && old.GetId() == p.GetId() && len(ps) > 0 && ps[len(ps)-1].GetResumedUnix() > 0:
			at, state = time.Unix(ps[len(ps)-1].GetResumedUnix(), 0), "resumed by "+ps[len(ps)-1].GetResumedBy()
		}
		if !present.NoChange(p) {
			m.logEvent(at, fmt.Sprintf("change #%d %s: %s", p.GetId(), state, present.Change(p.GetPlan().GetRequest())), p.GetError() != "")
		}
	}
	m.change = p
}

// checkDeadlines turns a node DOWN when its last stats sample is older than DownAfter.
func (m *clusterState) checkDeadlines(now time.Time) bool {
	down := false
	for _, id := range m.sortedIDs() {
		n := m.nodes[id]
		seen := n.lastSeen
		if seen.IsZero() {
			// Never sampled: counted from when the console first heard of it (a node that
			// joins while it runs is not DOWN for the time before it joined).
			seen = n.known
			if seen.Before(m.started) {
				seen = m.started
			}
		}
		if !n.down && now.Sub(seen) > m.downAfter {
			n.down, down = true, true
			m.logEvent(now, fmt.Sprintf("node %s down (no stats for %s)", n.id, now.Sub(seen).Truncate(100*time.Millisecond)), true)
		}
	}
	return down
}

func (m *clusterState) sortedIDs() []string {
	ids := make([]string, 0, len(m.nodes))
	for id := range m.nodes {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, present.CompareIDs)
	return ids
}

func (n *node) displayState() string {
	switch {
	case n.down:
		return present.NodeState(kvpb.NodeState_NODE_STATE_DOWN)
	case n.stats.GetDiskFull():
		return present.DiskFullShort
	case n.gray != "":
		return present.GrayShort
	case n.state != kvpb.NodeState_NODE_STATE_UNSPECIFIED:
		return present.NodeState(n.state)
	case n.stats.GetState() != kvpb.NodeState_NODE_STATE_UNSPECIFIED:
		return present.NodeState(n.stats.GetState())
	}
	return present.NodeState(kvpb.NodeState_NODE_STATE_UP)
}

// heatRows builds the heatmap's rows from the ring: a row per member with the vnodes it owns
// (its tokens; the vnode ending at token t is the range (previous token, t]) in token order.
// A cell's load combines what every node that answered reports for that range: reads and
// writes summed over the replicas, keys and bytes from the owner (the largest report when the
// owner is down or silent). So a hot range lights up once, in the row of the node that owns it.
func (m *clusterState) heatRows() []heatmap.Row {
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
