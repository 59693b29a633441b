// Gray failures: how calls to each peer (and to this node's own store) went over the last
// few seconds, the views of their peers that nodes swap once a second (Replica.Links), and
// the verdict drawn from them: which node answers, but badly, while the others reach each
// other fine (Gray).

package replica

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"ringkv/proto/kvpb"
)

// The verdict's thresholds. A link is judged on the calls of the last linkWindow seconds,
// when there were at least minLinkCalls of them (the Links exchange alone makes one a second).
const (
	linkWindow   = 5 // seconds
	minLinkCalls = 3
	// lateAfter: a call that took longer answered late. A lost packet costs TCP a
	// retransmission timeout of 200 ms or more; a loaded machine rarely stalls a call that
	// long, and never on most links at once.
	lateAfter = 100 * time.Millisecond
	// badShare of a link's calls failed or late make it lossy.
	badShare = 0.05
	// A node's link whose mean latency (both ways) is at least slowFloor and slowFactor times
	// the median of the links between the other nodes is slow: lost packets that TCP recovers
	// fast, or a slow link. Measured on a loaded machine (load average 25), healthy links
	// differed by up to 3.3x at 3 ms; 5% loss made 11-18 ms of 1-2.5 ms.
	slowFloor    = 8 * time.Millisecond
	slowFactor   = 3
	clientFactor = 5
	// grayConfirm is how long a verdict must be drawn at every look before it counts (a
	// loaded machine stalls a node for a second or two); grayHold how long it holds after
	// it was last drawn.
	grayConfirm = 2 * time.Second
	grayHold    = 15 * time.Second
	// A link on which at least retransShare of minSegments or more TCP segments were sent
	// again loses packets (a healthy link retransmits next to none).
	retransShare = 0.01
	minSegments  = 50
	minRetrans   = 3
	// A store whose mean write is at least slowDiskFloor and slowFactor times the median of
	// the other nodes' is slow.
	slowDiskFloor = 10 * time.Millisecond
	// A node that went away or came back flapAfter times within flapWindow flaps: gone,
	// back and gone again. flapMinUp: a departure sooner after a comeback is the same outage.
	flapAfter  = 3
	flapWindow = time.Minute
	flapMinUp  = 500 * time.Millisecond
	// flapQuiet: a node steady that long since its last departure or comeback has settled,
	// and its flaps are forgotten.
	flapQuiet = 15 * time.Second
	// viewTTL: a peer's view older than this is not used; a node heard from within aliveTTL
	// answers (the views are swapped once a second, both ways).
	viewTTL  = 5 * time.Second
	aliveTTL = 2500 * time.Millisecond
)

// linkBucket is one second of calls on one link.
type linkBucket struct {
	sec                       int64
	calls, failed, late, okes uint64
	sumMicros, minMicros      uint64 // minMicros: of the okes (when there are some)
	segs, retrans             uint64
}

// link is the recent record of the calls to one peer (or to this node's store). Safe for
// concurrent use.
type link struct {
	mu      sync.Mutex
	buckets [linkWindow]linkBucket
	// flaps are when the peer went away or came back, within flapWindow (seen); away
	// whether its last counted flap was a departure, lastBack its last comeback, seenUp
	// whether it was ever seen answering.
	flaps    []time.Time
	away     bool
	lastBack time.Time
	seenUp   bool
	// awayAt is when its last counted departure was; awayFor how long it was away before
	// its last comeback.
	awayAt  time.Time
	awayFor time.Duration
	// The TCP counts last sampled (since start), and whether there was a sample.
	segs, retrans uint64
	sampled       bool
}

// tcp records the TCP counts of the link since start (LinkCounts): what grew since the last
// sample goes to this second.
func (l *link) tcp(now time.Time, segs, retrans uint64) {
	sec := now.Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sampled && segs >= l.segs && retrans >= l.retrans {
		b := &l.buckets[sec%linkWindow]
		if b.sec != sec {
			*b = linkBucket{sec: sec}
		}
		b.segs += segs - l.segs
		b.retrans += retrans - l.retrans
	}
	l.segs, l.retrans, l.sampled = segs, retrans, true
}

// observe records one call that took d; failed when it did not answer (timed out,
// refused, reset).
func (l *link) observe(now time.Time, d time.Duration, failed bool) {
	sec := now.Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := &l.buckets[sec%linkWindow]
	if b.sec != sec {
		*b = linkBucket{sec: sec}
	}
	b.calls++
	switch {
	case failed:
		b.failed++
	default:
		us := uint64(max(d.Microseconds(), 1))
		if b.okes == 0 || us < b.minMicros {
			b.minMicros = us
		}
		b.okes++
		b.sumMicros += us
		if d >= lateAfter {
			b.late++
		}
	}
}

// seen records whether the peer answers now (down: it does not), and reports whether that
// counted a flap. Its departures and its comebacks count as flaps: a departure only once it
// was seen up, and not within flapMinUp of its last comeback (a node that dies as it starts
// is one outage); a comeback only after a counted departure. A restart counts two; a node
// stopped and started every few seconds three by its second departure.
func (l *link) seen(now time.Time, down bool) (flapped bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !down:
		if l.away {
			l.flaps = append(l.flaps, now)
			l.away, l.lastBack, l.awayFor = false, now, now.Sub(l.awayAt)
			flapped = true
		}
		l.seenUp = true
	case l.seenUp && !l.away && (l.lastBack.IsZero() || now.Sub(l.lastBack) >= flapMinUp):
		l.flaps = append(l.flaps, now)
		l.away, l.awayAt = true, now
		flapped = true
	}
	l.trimFlaps(now)
	return flapped
}

// goneSince reports whether the peer is away by this node's own calls (its last counted
// flap a departure), and since when.
func (l *link) goneSince() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.awayAt, l.away
}

// flap records one departure or comeback as it is (tests).
func (l *link) flap(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flaps = append(l.flaps, now)
	l.trimFlaps(now)
}

func (l *link) trimFlaps(now time.Time) {
	if n := len(l.flaps); n > 0 && now.Sub(l.flaps[n-1]) > flapQuiet {
		l.flaps = l.flaps[:0] // settled
		return
	}
	i := 0
	for i < len(l.flaps) && now.Sub(l.flaps[i]) > flapWindow {
		i++
	}
	l.flaps = l.flaps[i:]
}

// stats sums the last linkWindow seconds as the LinkStats of peer.
func (l *link) stats(now time.Time, peer string) *kvpb.LinkStats {
	sec := now.Unix()
	s := &kvpb.LinkStats{Peer: peer}
	var okes, sum uint64
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.buckets {
		if b.sec <= sec-linkWindow || b.sec > sec {
			continue
		}
		s.Calls += b.calls
		s.Failed += b.failed
		s.Late += b.late
		if b.okes > 0 && (okes == 0 || b.minMicros < s.MinMicros) {
			s.MinMicros = b.minMicros
		}
		okes += b.okes
		sum += b.sumMicros
		s.Segments += b.segs
		s.Retransmits += b.retrans
	}
	if okes > 0 {
		s.MeanMicros = sum / okes
	}
	l.trimFlaps(now)
	s.Flaps = uint32(len(l.flaps))
	// A comeback within flapWindow, while the peer is still back (kvctl status notes it).
	if !l.away && !l.lastBack.IsZero() && now.Sub(l.lastBack) <= flapWindow {
		s.BackAgoMillis = uint64(max(now.Sub(l.lastBack).Milliseconds(), 1))
		s.AwayMillis = uint64(max(l.awayFor.Milliseconds(), 1))
	}
	return s
}

// linker is implemented by replicas that swap link views with their peer (Remote).
type linker interface {
	// Links sends this node's view and returns the peer's. It waits for the connection
	// within ctx.
	Links(ctx context.Context, mine *kvpb.LinkView) (*kvpb.LinkView, error)
}

// heardView is a peer's view as this node last received it.
type heardView struct {
	at    time.Time
	links map[string]*kvpb.LinkStats
}

// LinkView returns this node's view: its recent calls to every peer of the current ring,
// and to its own store.
//
// Its own entry counts the TCP segments this node sent to its clients, and their
// retransmits (Config.ClientCounts).
func (c *Coordinator) LinkView() *kvpb.LinkView {
	now := c.cfg.Now()
	if c.cfg.ClientCounts != nil {
		segs, re := c.cfg.ClientCounts()
		c.selfLink.tcp(now, segs, re)
	}
	v := &kvpb.LinkView{Node: c.self, Links: []*kvpb.LinkStats{c.selfLink.stats(now, c.self)}}
	if rv := c.view(); rv != nil && rv.Current != nil {
		for _, m := range rv.Current.Members() {
			if m.ID == c.self {
				continue
			}
			v.Links = append(v.Links, c.peerState(m.ID).link.stats(now, m.ID))
		}
	}
	return v
}

// SawLinks records a peer's view, received in a Links call it made or answered.
func (c *Coordinator) SawLinks(v *kvpb.LinkView) {
	if v == nil || v.GetNode() == "" || v.GetNode() == c.self {
		return
	}
	h := heardView{at: c.cfg.Now(), links: make(map[string]*kvpb.LinkStats, len(v.GetLinks()))}
	for _, l := range v.GetLinks() {
		h.links[l.GetPeer()] = l
	}
	c.viewsMu.Lock()
	c.views[v.GetNode()] = h
	c.viewsMu.Unlock()
}

// CalledLinks records a peer's view received in a Links call it made to this node, which
// shows that the peer reaches this node (Unheard).
func (c *Coordinator) CalledLinks(v *kvpb.LinkView) {
	c.SawLinks(v)
	if v.GetNode() == "" || v.GetNode() == c.self {
		return
	}
	c.viewsMu.Lock()
	c.calledBy[v.GetNode()] = true
	c.viewsMu.Unlock()
}

// Unheard returns the peers of the current ring that this node reaches (connected, answering)
// but that have not yet called it (CalledLinks) since it started: a node that has just
// restarted is ready only once its peers reach it again, not when it reaches them (their
// connections to it may still wait out a reconnect backoff). Peers that do not serve Links
// are not waited for.
func (c *Coordinator) Unheard() []string {
	v := c.view()
	if v == nil || v.Current == nil {
		return nil
	}
	var out []string
	for _, t := range c.targets(v.Current.Members()) {
		if t.p == nil || t.r == nil || !t.p.contacted.Load() || t.p.down.Load() || t.p.noLinks.Load() {
			continue
		}
		c.viewsMu.Lock()
		called := c.calledBy[t.id]
		c.viewsMu.Unlock()
		if !called {
			out = append(out, t.id)
		}
	}
	return out
}

// exchange swaps views with a peer, as the probe of watchPeer; errNoLinks when the peer
// does not serve Links.
func (c *Coordinator) exchange(ctx context.Context, l linker) error {
	theirs, err := l.Links(ctx, c.LinkView())
	if err != nil {
		return err
	}
	c.SawLinks(theirs)
	return nil
}

// linkJudgement is what one node's calls to another say of the link between them.
type linkJudgement struct {
	known  bool // enough calls to judge
	bad    bool // cut, lossy or late beyond doubt, whatever the other links do
	cut    bool // most calls failed: the peer cannot be reached at all
	lossy  bool // TCP retransmitted a share of its segments
	st     *kvpb.LinkStats
	meanMs float64
}

// judge judges one direction of a link by its own figures.
func judge(s *kvpb.LinkStats) linkJudgement {
	if s == nil || s.GetCalls() < minLinkCalls {
		return linkJudgement{}
	}
	j := linkJudgement{known: true, st: s, meanMs: float64(s.GetMeanMicros()) / 1000}
	calls := float64(s.GetCalls())
	j.cut = float64(s.GetFailed()) >= calls/2
	j.lossy = lossy(s)
	j.bad = j.cut || j.lossy || float64(s.GetFailed()+s.GetLate()) >= badShare*calls
	return j
}

// matrix is the views at hand: views[a][b] is how a's calls to b went.
type matrix map[string]map[string]*kvpb.LinkStats

func (m matrix) judge(from, to string) linkJudgement { return judge(m[from][to]) }

// bad tells whether the link between a and b goes badly by either side's figures; known
// whether either side can tell.
func (m matrix) bad(a, b string) (bad, known bool) {
	x, y := m.judge(a, b), m.judge(b, a)
	return x.bad || y.bad, x.known || y.known
}

// meanMs is the mean latency of the link between a and b over the directions that answered
// calls; ok false when neither did.
func (m matrix) meanMs(a, b string) (float64, bool) {
	sum, k := 0.0, 0
	for _, j := range []linkJudgement{m.judge(a, b), m.judge(b, a)} {
		if j.known && ok(j.st) > 0 {
			sum += j.meanMs
			k++
		}
	}
	if k == 0 {
		return 0, false
	}
	return sum / float64(k), true
}

// minMs is the least latency of the link between a and b: of the directions that answered
// calls, the slower one's fastest call (a delay on the path to b slows a's calls to b, and
// perhaps not b's to a). ok false when neither direction tells (no calls, or a peer that
// does not send it).
func (m matrix) minMs(a, b string) (float64, bool) {
	least, known := 0.0, false
	for _, j := range []linkJudgement{m.judge(a, b), m.judge(b, a)} {
		if j.known && ok(j.st) > 0 && j.st.GetMinMicros() > 0 {
			least, known = max(least, float64(j.st.GetMinMicros())/1000), true
		}
	}
	return least, known
}

// Gray returns the nodes of the current ring that answer but badly, judged from this node's
// own calls and the views its peers sent: a node whose links to a majority of its peers go
// badly while those peers reach each other fine (lossy, slow, cut one way), a node whose own
// store is much slower than the others', a node that keeps going away and coming back. A
// node that loses one peer is not gray, and neither is one that is simply down. A verdict
// holds for grayHold after it was last drawn, so that a node taken out of a balancer's
// rotation (and so called less) does not flap back in while its fault lasts. Needs three
// nodes or more; sorted by node.
func (c *Coordinator) Gray() []*kvpb.GrayNode {
	rv := c.view()
	if rv == nil || rv.Current == nil {
		return nil
	}
	var ids []string
	for _, m := range rv.Current.Members() {
		ids = append(ids, m.ID)
	}
	if len(ids) < 3 {
		return nil
	}
	now := c.cfg.Now()
	views := matrix{}
	own := map[string]*kvpb.LinkStats{}
	for _, l := range c.LinkView().GetLinks() {
		own[l.GetPeer()] = l
	}
	views[c.self] = own
	heard := map[string]bool{c.self: true}
	// gone: the nodes this node saw go away (refused or unanswered) after their view last
	// arrived. That is fresher than aliveTTL, which tells a node is down only seconds later.
	awayAt := map[string]time.Time{}
	for _, x := range ids {
		if x == c.self {
			continue
		}
		if at, away := c.peerState(x).link.goneSince(); away {
			awayAt[x] = at
		}
	}
	gone := map[string]bool{}
	c.viewsMu.Lock()
	defer c.viewsMu.Unlock()
	for id, h := range c.views {
		if now.Sub(h.at) <= viewTTL && id != c.self {
			views[id] = h.links
			heard[id] = now.Sub(h.at) <= aliveTTL
		}
	}
	for x, at := range awayAt {
		h, ok := c.views[x]
		gone[x] = !ok || at.After(h.at)
	}
	// Draw the verdicts. The rules on a node's own figures (its clients' retransmits, its
	// disk) compare it with the others alone: when they name more than one node, or a node
	// besides one named by its links, they name none (one odd node, or none).
	drawn := map[string]*kvpb.GrayNode{}
	// slowAll: the nodes drawn slow by the fastest call on every bad link (grayLinks).
	slowAll := map[string]bool{}
	var alone []*kvpb.GrayNode
	for _, x := range ids {
		// A node its peers saw go away again, and that is away now, flaps: its links' last
		// figures (calls failing since it went, or late as it started) are the flapping's, and
		// aliveTTL would hold the verdict back seconds after the departure was seen.
		if g := flapping(x, ids, views); g != nil && gone[x] {
			drawn[x] = g
			continue
		}
		if g, slowest := grayLinks(x, ids, views, heard[x]); g != nil {
			// Writes to a node whose disk is slow are slow calls: its store says which. Some
			// of them cross lateAfter on a loaded machine, which reads as lossy unless TCP
			// sent segments again.
			if d := slowDisk(x, ids, views); d != nil && (g.GetKind() == kvpb.GrayNode_LATENCY ||
				g.GetKind() == kvpb.GrayNode_LOSS && !retransmitting(x, ids, views)) {
				g, slowest = d, false
			}
			drawn[x], slowAll[x] = g, slowest
		} else if g := flapping(x, ids, views); g != nil {
			drawn[x] = g
		} else if g := clientLoss(x, ids, views); g != nil {
			alone = append(alone, g)
		} else if g := slowDisk(x, ids, views); g != nil {
			alone = append(alone, g)
		}
	}
	if len(alone) == 1 && len(drawn) == 0 {
		drawn[alone[0].GetNode()] = alone[0]
	}
	// One gray node at a time: while a verdict on one holds, the others' links look worse
	// by comparison (it is called less once out of rotation), and two nodes out of three
	// out of rotation would be worse than one gray node in it. Two drawn at once name none.
	for x := range drawn {
		for y, h := range c.grayHeld {
			if y != x && now.Sub(h.at) <= grayHold {
				delete(drawn, x)
			}
		}
	}
	if len(drawn) > 1 {
		clear(drawn)
	}
	var out []*kvpb.GrayNode
	for _, x := range ids {
		// A verdict counts once it was drawn at every look for grayConfirm (a look more than
		// 2 s after the last starts over), and holds grayHold after the last. A held verdict
		// takes another kind only once that kind too was drawn at every look for grayConfirm:
		// as a fault ends its figures linger in the window (a few very late calls, no more
		// loss), and what they draw for a look or two is not what is wrong now.
		if g := drawn[x]; g != nil {
			f, ok := c.grayFirst[x]
			if !ok || now.Sub(f.last) > 2*time.Second {
				f = firstDrawn{first: now, kindFirst: now, kind: g.GetKind()}
			}
			if f.kind != g.GetKind() {
				f.kind, f.kindFirst = g.GetKind(), now
			}
			f.last = now
			c.grayFirst[x] = f
			// Departures and comebacks are events, not a loaded machine's noise: no wait.
			flapping := g.GetKind() == kvpb.GrayNode_FLAPPING
			// A cut (most calls one way failing) is no loaded machine's noise either, and as
			// one begins its failures are under half the window's calls for a few looks,
			// which draw loss: once a cut is drawn it takes the place of a held loss or
			// latency at once, so that every node says the same of the node within a look.
			cut := g.GetKind() == kvpb.GrayNode_UNREACHABLE || g.GetKind() == kvpb.GrayNode_CUT_OFF
			// Nor is a link whose every call in the window was slow, the fastest too: as a
			// delay begins its mean rises first, which draws loss ("a few calls very late")
			// until the window's last fast call leaves it, and a fault's lingering figures
			// never make the fastest call slow (a fast call after it ends brings it down).
			// Confirming that kind again took the drill's +200 ms delay 10.3 s to name, at
			// load 15, against 10 s.
			sure := cut || slowAll[x]
			if now.Sub(f.first) >= grayConfirm || flapping {
				h, held := c.grayHeld[x]
				switch {
				case !held || now.Sub(h.at) > grayHold || h.g.GetKind() == g.GetKind() ||
					now.Sub(f.kindFirst) >= grayConfirm || flapping || sure:
					c.grayHeld[x] = heldVerdict{g: g, at: now, drawn: now}
				default:
					// Still gray, of a kind not yet confirmed: the held verdict stays as it
					// was drawn, and holds on.
					h.at = now
					c.grayHeld[x] = h
				}
			}
		} else {
			delete(c.grayFirst, x)
		}
		if h, ok := c.grayHeld[x]; ok && now.Sub(h.at) <= grayHold {
			out = append(out, h.shown(now))
		}
	}
	for x, h := range c.grayHeld {
		if now.Sub(h.at) > grayHold || !slices.Contains(ids, x) {
			delete(c.grayHeld, x)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetNode() < out[j].GetNode() })
	named := &grayCache{at: now, nodes: make(map[string]bool, len(out))}
	for _, g := range out {
		named.nodes[g.GetNode()] = true
	}
	c.grayNow.Store(named)
	return out
}

// grayCache is a verdict of Gray and when it was drawn.
type grayCache struct {
	at    time.Time
	nodes map[string]bool
}

// grayRefresh is how old the verdict the read order goes by may be.
const grayRefresh = 500 * time.Millisecond

// grayPeers returns the nodes named gray by the last verdict, drawing it again when it is
// older than grayRefresh (the read order's look: one request in that time pays for it).
func (c *Coordinator) grayPeers() map[string]bool {
	g := c.grayNow.Load()
	if g == nil || c.cfg.Now().Sub(g.at) >= grayRefresh {
		// Mark the verdict fresh before drawing it, so that concurrent requests do not all draw.
		if c.grayNow.CompareAndSwap(g, &grayCache{at: c.cfg.Now(), nodes: gray(g)}) {
			c.Gray()
		}
		g = c.grayNow.Load()
	}
	return g.nodes
}

func gray(g *grayCache) map[string]bool {
	if g == nil {
		return nil
	}
	return g.nodes
}

// firstDrawn is when a verdict on a node was first drawn in a row of looks, and last; kind
// the kind drawn at the last look, drawn at every look since kindFirst.
type firstDrawn struct {
	first, last, kindFirst time.Time
	kind                   kvpb.GrayNode_Kind
}

// heldVerdict is a gray verdict, when the node was last drawn gray (at), and when this
// verdict's own figures last drew it (drawn).
type heldVerdict struct {
	g         *kvpb.GrayNode
	at, drawn time.Time
}

// heldSaid is how long after its figures last drew it a held verdict says so: an operator
// reads what is wrong now, and a verdict kept from older figures must say it is.
const heldSaid = 2 * time.Second

// shown is the verdict as Gray returns it at now: as drawn, or, once its own figures last
// drew it heldSaid ago or more, with how long ago that was.
func (h heldVerdict) shown(now time.Time) *kvpb.GrayNode {
	if h.drawn.IsZero() || now.Sub(h.drawn) < heldSaid {
		return h.g
	}
	return &kvpb.GrayNode{Node: h.g.GetNode(), Kind: h.g.GetKind(),
		Detail: fmt.Sprintf("%s (held: drawn %.0fs ago)", h.g.GetDetail(), now.Sub(h.drawn).Seconds())}
}

func ok(s *kvpb.LinkStats) uint64 { return s.GetCalls() - s.GetFailed() }

// lateShare is the share of the link's calls that failed or answered late.
func lateShare(s *kvpb.LinkStats) float64 {
	return float64(s.GetFailed()+s.GetLate()) / float64(max(s.GetCalls(), 1))
}

// reShare is the share of the link's TCP segments sent again.
func reShare(s *kvpb.LinkStats) float64 {
	return float64(s.GetRetransmits()) / float64(max(s.GetSegments(), 1))
}

// lossy reports whether the link's TCP retransmits show lost packets.
func lossy(s *kvpb.LinkStats) bool {
	segs, re := s.GetSegments(), s.GetRetransmits()
	return segs >= minSegments && re >= minRetrans && float64(re) >= retransShare*float64(segs)
}

// grayLinks judges node x by its links: gray when the links to a majority of its peers go
// badly (by their own figures, or slower than slowFactor times the links between the
// others) while every other node reaches most of the others fine, and x answers (its view
// arrived lately: heard): a node that is down is not gray. slowest: it is slow links drawn
// by the fastest call on every bad link, which no loaded machine's noise and no fault's
// lingering figures draw.
func grayLinks(x string, ids []string, views matrix, heard bool) (_ *kvpb.GrayNode, slowest bool) {
	if !heard {
		return nil, false
	}
	n := len(ids)
	// The others' links: the yardsticks of latency (mean and fastest call), and they must go
	// fine.
	var others, othersMin []float64
	sawGood, othersBad := false, false
	for _, y := range ids {
		if y == x {
			continue
		}
		bad := 0
		for _, z := range ids {
			if z == x || z == y {
				continue
			}
			b, known := views.bad(y, z)
			if b {
				bad++
			} else if known {
				sawGood = true
			}
			if y < z {
				if m, ok := views.meanMs(y, z); ok {
					others = append(others, m)
				}
				if m, ok := views.minMs(y, z); ok {
					othersMin = append(othersMin, m)
				}
			}
		}
		if bad > 0 && 2*bad >= n-2 {
			othersBad = true // the others do not reach each other fine either
		}
	}
	yardstick := median(others)
	slowMs := max(float64(slowFloor.Microseconds())/1000, slowFactor*yardstick)
	// The others' least latencies: a link whose every call takes slowFactor times the
	// fastest call between the others (and slowFloor) is slow, whatever its few late calls.
	// A loaded machine delays some calls, never all of them.
	slowLink := func(y string) bool { return false }
	if len(othersMin) > 0 {
		minYard := median(othersMin)
		slowLink = func(y string) bool {
			m, ok := views.minMs(x, y)
			return ok && m >= max(float64(slowFloor.Microseconds())/1000, slowFactor*minYard)
		}
	}
	// The others do not reach each other fine either (late calls, lost packets): not one odd
	// node, unless x's links to a majority of its peers are slow at their fastest call, which
	// the others' are not. A loaded machine makes some calls late everywhere, never the
	// fastest of all: in CI, at load average 17, 11% of n1's calls to n2 took over lateAfter
	// while n3's links were delayed 200 ms, and n3 went unnamed for 14 s. Then only its slow
	// links count (badTo, below, must still be a majority).
	slowOnly := othersBad || !sawGood
	// The others' worst shares of late calls and of retransmits: x's links must be worse by
	// slowFactor (on a loaded machine every link has some).
	var lateYard, reYard float64
	for _, y := range ids {
		for _, z := range ids {
			if y == x || z == x || y == z {
				continue
			}
			if j := views.judge(y, z); j.known {
				lateYard = max(lateYard, lateShare(j.st))
				reYard = max(reYard, reShare(j.st))
			}
		}
	}
	worse := func(j linkJudgement) bool {
		switch {
		case !j.known:
			return false
		case j.cut:
			return true
		case j.lossy && reShare(j.st) >= slowFactor*reYard:
			return true
		}
		return lateShare(j.st) >= max(badShare, slowFactor*lateYard)
	}
	var badTo []string
	for _, y := range ids {
		if y == x {
			continue
		}
		b := slowLink(y)
		if !slowOnly {
			b = b || worse(views.judge(x, y)) || worse(views.judge(y, x))
			if m, ok := views.meanMs(x, y); ok && m >= slowMs && yardstick > 0 {
				b = true
			}
		}
		if b {
			badTo = append(badTo, y)
		}
	}
	if 2*len(badTo) <= n-1 {
		return nil, false
	}
	// What is wrong, by direction: x's own calls (out) and its peers' calls to it (in).
	var outCut, inCut, outFine, inFine, slow int
	var calls, failed, late, segs, retrans uint64
	var sumMs, leastMs float64
	var nMs int
	var fastTo int // bad links whose fastest call is known and not slow
	var fastMs float64
	for _, y := range badTo {
		if slowLink(y) {
			slow++
			m, _ := views.minMs(x, y)
			leastMs = max(leastMs, m)
		} else if m, ok := views.minMs(x, y); ok && len(othersMin) > 0 {
			fastTo++
			fastMs = max(fastMs, m)
		}
		o, i := views.judge(x, y), views.judge(y, x)
		for _, j := range []linkJudgement{o, i} {
			if j.known {
				calls += j.st.GetCalls()
				failed += j.st.GetFailed()
				late += j.st.GetLate()
				segs += j.st.GetSegments()
				retrans += j.st.GetRetransmits()
			}
		}
		if m, ok := views.meanMs(x, y); ok {
			sumMs += m
			nMs++
		}
		switch {
		case o.cut:
			outCut++
		case o.known && !o.bad:
			outFine++
		}
		switch {
		case i.cut:
			inCut++
		case i.known && !i.bad:
			inFine++
		}
	}
	g := &kvpb.GrayNode{Node: x}
	k := len(badTo)
	lateShare := float64(failed+late) / float64(max(calls, 1))
	switch {
	case inCut == k && outFine == k:
		g.Kind = kvpb.GrayNode_UNREACHABLE
		g.Detail = fmt.Sprintf("its peers cannot reach it (%s), it reaches them", strings.Join(badTo, ", "))
	case outCut == k && inFine == k:
		g.Kind = kvpb.GrayNode_CUT_OFF
		g.Detail = fmt.Sprintf("it cannot reach its peers (%s), they reach it", strings.Join(badTo, ", "))
	// A slow link makes every call slow, the fastest too; lost packets make a minority of
	// calls late (a retransmission each) and TCP send segments again.
	case slow == k:
		g.Kind = kvpb.GrayNode_LATENCY
		g.Detail = fmt.Sprintf("calls with its peers take %.1fms at the fastest (%.1fms on average), %.1fms on average between the others",
			leastMs, sumMs/float64(max(nMs, 1)), yardstick)
	case lateShare < 0.5 && (retrans*100 >= segs && retrans > 0 || lateShare >= 0.01):
		g.Kind = kvpb.GrayNode_LOSS
		g.Detail = fmt.Sprintf("%.1f%% of %d TCP segments to and from its peers sent again, %.0f%% of %d calls failed or took over %v; the others reach each other fine",
			100*float64(retrans)/float64(max(segs, 1)), segs, 100*lateShare, calls, lateAfter)
	// Slow on average, but with fast calls among them: a few calls very late, as lost packets
	// make them (or as they linger in the window once the loss ended), not a slow link.
	case fastTo > 0:
		g.Kind = kvpb.GrayNode_LOSS
		g.Detail = fmt.Sprintf("calls with its peers take %.1fms on average but %.1fms at the fastest, %.1fms on average between the others: a few calls very late",
			sumMs/float64(max(nMs, 1)), fastMs, yardstick)
	default:
		g.Kind = kvpb.GrayNode_LATENCY
		g.Detail = fmt.Sprintf("calls with its peers take %.1fms on average, %.1fms between the others", sumMs/float64(max(nMs, 1)), yardstick)
	}
	return g, g.GetKind() == kvpb.GrayNode_LATENCY && slow == k
}

// retransmitting reports whether TCP's retransmits show lost packets on a link of x's, by
// either side's figures.
func retransmitting(x string, ids []string, views matrix) bool {
	for _, y := range ids {
		if y != x && (views[x][y] != nil && lossy(views[x][y]) || views[y][x] != nil && lossy(views[y][x])) {
			return true
		}
	}
	return false
}

// clientLoss judges node x by the TCP segments it sent to its clients: gray when it had to
// send a share of them again while every other node, with clients too, had to send
// clientFactor times less. (A loaded machine retransmits on loopback too, when a receiver
// is not scheduled in time: up to 1% of segments seen at a load average of 40.)
func clientLoss(x string, ids []string, views matrix) *kvpb.GrayNode {
	mine := views[x][x]
	if mine == nil || !lossy(mine) {
		return nil
	}
	share := func(s *kvpb.LinkStats) float64 { return float64(s.GetRetransmits()) / float64(s.GetSegments()) }
	worst := 0.0
	for _, y := range ids {
		if y == x {
			continue
		}
		s := views[y][y]
		if s == nil || s.GetSegments() < minSegments {
			return nil // not every other node has clients to compare with
		}
		if share(s)*clientFactor > share(mine) {
			return nil
		}
		worst = max(worst, share(s))
	}
	return &kvpb.GrayNode{Node: x, Kind: kvpb.GrayNode_LOSS,
		Detail: fmt.Sprintf("%.1f%% of %d TCP segments to its clients sent again, at most %.1f%% at the others",
			100*share(mine), mine.GetSegments(), 100*worst)}
}

// slowDisk judges node x by its own store's writes against the other nodes' stores.
func slowDisk(x string, ids []string, views map[string]map[string]*kvpb.LinkStats) *kvpb.GrayNode {
	mine := views[x][x]
	if mine == nil || ok(mine) < minLinkCalls {
		return nil
	}
	var others []float64
	for _, y := range ids {
		if s := views[y][y]; y != x && s != nil && ok(s) >= minLinkCalls {
			others = append(others, float64(s.GetMeanMicros())/1000)
		}
	}
	if len(others) == 0 {
		return nil
	}
	med := median(others)
	m := float64(mine.GetMeanMicros()) / 1000
	if m < float64(slowDiskFloor.Milliseconds()) || m < slowFactor*med {
		return nil
	}
	return &kvpb.GrayNode{Node: x, Kind: kvpb.GrayNode_SLOW_DISK,
		Detail: fmt.Sprintf("its own store answers in %.1fms on average, the others' in %.1fms", m, med)}
}

// median sorts xs and returns its middle value (the upper one of an even count); 0 when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// flapping judges node x by how often its peers saw it go away or come back: most of them at
// least flapAfter times within flapWindow.
func flapping(x string, ids []string, views map[string]map[string]*kvpb.LinkStats) *kvpb.GrayNode {
	saw, most := 0, uint32(0)
	for _, y := range ids {
		if s := views[y][x]; y != x && s != nil && s.GetFlaps() >= flapAfter {
			saw++
			most = max(most, s.GetFlaps())
		}
	}
	if 2*saw <= len(ids)-1 {
		return nil
	}
	return &kvpb.GrayNode{Node: x, Kind: kvpb.GrayNode_FLAPPING,
		Detail: fmt.Sprintf("went away or came back %d times in the last %v", most, flapWindow)}
}

// GrayOf returns the verdict on this node itself, nil when it is not gray.
func (c *Coordinator) GrayOf() *kvpb.GrayNode {
	for _, g := range c.Gray() {
		if g.GetNode() == c.self {
			return g
		}
	}
	return nil
}
