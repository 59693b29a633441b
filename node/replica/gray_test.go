package replica

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// linkSpec is how one node's calls to another went: calls made, of them failed and late, and
// the latency of the others.
type linkSpec struct {
	calls, failed, late int
	d                   time.Duration
	// fastest, when set, is how long one of the calls that took d took instead: the link's
	// least latency (a lossy link answers most calls as fast as the others).
	fastest       time.Duration
	flaps         int
	segs, retrans uint64 // TCP segments sent, and retransmitted
}

// callTimes are how long the calls that answered took.
func (s linkSpec) callTimes() []time.Duration {
	var out []time.Duration
	for i := s.failed; i < s.calls; i++ {
		switch {
		case i < s.failed+s.late:
			out = append(out, 150*time.Millisecond)
		case i == s.calls-1 && s.fastest > 0:
			out = append(out, s.fastest)
		default:
			out = append(out, s.d)
		}
	}
	return out
}

func (s linkSpec) stats(peer string) *kvpb.LinkStats {
	st := &kvpb.LinkStats{Peer: peer, Calls: uint64(s.calls), Failed: uint64(s.failed), Late: uint64(s.late), Flaps: uint32(s.flaps),
		Segments: s.segs, Retransmits: s.retrans}
	if ds := s.callTimes(); len(ds) > 0 {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		st.MeanMicros = uint64((sum / time.Duration(len(ds))).Microseconds())
		st.MinMicros = uint64(slices.Min(ds).Microseconds())
	}
	return st
}

// feed replays s on l.
func (s linkSpec) feed(l *link, now time.Time) {
	for range s.failed {
		l.observe(now, 0, true)
	}
	for _, d := range s.callTimes() {
		l.observe(now, d, false)
	}
	for range s.flaps {
		l.flap(now)
	}
	l.tcp(now.Add(-time.Second), 1000, 7)
	l.tcp(now, 1000+s.segs, 7+s.retrans)
}

// TestGrayVerdict: the verdict on every node from three nodes' views, each as seen from
// every node (its own calls measured, the others' views heard), and the reason a node that
// loses one peer, a node that is down and a cluster that is slow everywhere name nobody.
func TestGrayVerdict(t *testing.T) {
	good := linkSpec{calls: 40, d: time.Millisecond}
	lossy := linkSpec{calls: 60, late: 4, d: time.Millisecond}
	dead := linkSpec{calls: 5, failed: 5}
	retransmitting := linkSpec{calls: 40, d: time.Millisecond, segs: 800, retrans: 30}
	slow := linkSpec{calls: 40, d: 60 * time.Millisecond}
	flappy := linkSpec{calls: 40, d: time.Millisecond, flaps: 4}
	disk := func(d time.Duration) linkSpec { return linkSpec{calls: 40, d: d} }
	names := []string{"n1", "n2", "n3"}
	// links[from][to]; links[x][x] is x's own store. A node missing from heard sent no view.
	type matrix map[string]map[string]linkSpec
	uniform := func(except func(from, to string) (linkSpec, bool)) matrix {
		m := matrix{}
		for _, a := range names {
			m[a] = map[string]linkSpec{}
			for _, b := range names {
				s := good
				if x, ok := except(a, b); ok {
					s = x
				}
				m[a][b] = s
			}
		}
		return m
	}
	touches := func(x string, s linkSpec) func(from, to string) (linkSpec, bool) {
		return func(from, to string) (linkSpec, bool) { return s, from != to && (from == x || to == x) }
	}
	cases := []struct {
		name   string
		links  matrix
		silent string // a node whose view nobody hears (down)
		want   string // "n3 LOSS", or "" for nobody
	}{
		{"healthy", uniform(func(string, string) (linkSpec, bool) { return linkSpec{}, false }), "", ""},
		{"lossy node", uniform(touches("n3", lossy)), "", "n3 LOSS"},
		{"retransmitting node", uniform(touches("n2", retransmitting)), "", "n2 LOSS"},
		{"one lossy link is not gray", uniform(func(f, to string) (linkSpec, bool) {
			return lossy, (f == "n1" && to == "n3") || (f == "n3" && to == "n1")
		}), "", ""},
		{"lossy everywhere names nobody", uniform(func(f, to string) (linkSpec, bool) { return lossy, f != to }), "", ""},
		{"down is not gray", uniform(touches("n3", dead)), "n3", ""},
		{"inbound cut", uniform(func(f, to string) (linkSpec, bool) { return dead, to == "n3" && f != to }), "", "n3 UNREACHABLE"},
		{"outbound cut", uniform(func(f, to string) (linkSpec, bool) { return dead, f == "n3" && f != to }), "", "n3 CUT_OFF"},
		{"slow links", uniform(func(f, to string) (linkSpec, bool) { return slow, to == "n3" && f != to }), "", "n3 LATENCY"},
		{"a few late calls and slower: lossy", uniform(touches("n3", linkSpec{calls: 180, late: 8, d: 9 * time.Millisecond, fastest: time.Millisecond})), "", "n3 LOSS"},
		// Every call through a delay waits for it; on a loaded machine a few of them cross
		// lateAfter too, which alone would read as lost packets.
		{"slow links with a few late calls", uniform(func(f, to string) (linkSpec, bool) {
			return linkSpec{calls: 100, late: 6, d: 55 * time.Millisecond, fastest: 51 * time.Millisecond}, to == "n3" && f != to
		}), "", "n3 LATENCY"},
		{"slow links one way, fast the other", uniform(func(f, to string) (linkSpec, bool) {
			return linkSpec{calls: 100, d: 55 * time.Millisecond, fastest: 51 * time.Millisecond}, to == "n3" && f != to
		}), "", "n3 LATENCY"},
		// A loaded machine: every link slow now and then, some calls late, the fastest call
		// fast everywhere; and one node's links twice as slow as the others'.
		{"healthy under load names nobody", uniform(func(f, to string) (linkSpec, bool) {
			s := linkSpec{calls: 200, late: 3, d: 4 * time.Millisecond, fastest: 300 * time.Microsecond}
			if f == "n3" || to == "n3" {
				s.d, s.fastest = 8*time.Millisecond, 700*time.Microsecond
			}
			return s, f != to
		}), "", ""},
		// A loaded machine makes a share of every link's calls late (the others' too, which
		// alone names nobody), never the fastest call: a node delayed on every link is still
		// one odd node.
		{"slow links while the others' calls are late", uniform(func(f, to string) (linkSpec, bool) {
			if f == "n3" || to == "n3" {
				return linkSpec{calls: 160, late: 150, d: 230 * time.Millisecond, fastest: 201 * time.Millisecond}, f != to
			}
			return linkSpec{calls: 500, late: 60, d: 2 * time.Millisecond, fastest: 200 * time.Microsecond}, f != to
		}), "", "n3 LATENCY"},
		{"late everywhere, slow at the fastest nowhere, names nobody", uniform(func(f, to string) (linkSpec, bool) {
			if f == "n3" || to == "n3" {
				return linkSpec{calls: 100, late: 30, d: 20 * time.Millisecond, fastest: 300 * time.Microsecond}, f != to
			}
			return linkSpec{calls: 500, late: 60, d: 2 * time.Millisecond, fastest: 200 * time.Microsecond}, f != to
		}), "", ""},
		{"late everywhere, slow to one peer only, names nobody", uniform(func(f, to string) (linkSpec, bool) {
			if (f == "n3" && to == "n1") || (f == "n1" && to == "n3") {
				return linkSpec{calls: 160, late: 150, d: 230 * time.Millisecond, fastest: 201 * time.Millisecond}, true
			}
			return linkSpec{calls: 500, late: 60, d: 2 * time.Millisecond, fastest: 200 * time.Microsecond}, f != to
		}), "", ""},
		{"3x slower at 3ms is not gray", uniform(func(f, to string) (linkSpec, bool) {
			return linkSpec{calls: 40, d: 3 * time.Millisecond}, f != to && (f == "n3" || to == "n3")
		}), "", ""},
		{"slow disk", uniform(func(f, to string) (linkSpec, bool) {
			if f == to && f == "n2" {
				return disk(40 * time.Millisecond), true
			}
			return disk(2 * time.Millisecond), f == to
		}), "", "n2 SLOW_DISK"},
		// Under load a few of those slow writes cross lateAfter: still its disk, not loss
		// (no segment was sent again).
		{"slow disk with a few late calls to it", uniform(func(f, to string) (linkSpec, bool) {
			switch {
			case f == to && f == "n2":
				return disk(40 * time.Millisecond), true
			case f == to:
				return disk(time.Millisecond), true
			}
			return linkSpec{calls: 200, late: 6, d: 50 * time.Millisecond}, to == "n2"
		}), "", "n2 SLOW_DISK"},
		{"flapping", uniform(func(f, to string) (linkSpec, bool) { return flappy, to == "n1" && f != to }), "", "n1 FLAPPING"},
		// Its peers' writes to it wait on its disk: their calls to it are slow too.
		{"slow disk slows the calls to it", uniform(func(f, to string) (linkSpec, bool) {
			switch {
			case f == to && f == "n2":
				return disk(40 * time.Millisecond), true
			case f == to:
				return disk(time.Millisecond), true
			}
			return slow, to == "n2"
		}), "", "n2 SLOW_DISK"},
	}
	now := time.Unix(1_800_000_000, 0)
	for _, tc := range cases {
		for _, self := range names {
			if self == tc.silent {
				continue
			}
			t.Run(tc.name+"/from "+self, func(t *testing.T) {
				view := &ring.View{Current: newRing(t, 1, 3, names)}
				clock := now
				c := New(Config{Now: func() time.Time { return clock }}, self, func() *ring.View { return view }, nil, nil, nil, nil)
				t.Cleanup(func() { c.Close() })
				for to, s := range tc.links[self] {
					if to == self {
						s.feed(&c.selfLink, now)
					} else {
						s.feed(&c.peerState(to).link, now)
					}
				}
				for _, from := range names {
					if from == self || from == tc.silent {
						continue
					}
					v := &kvpb.LinkView{Node: from}
					for _, to := range names {
						v.Links = append(v.Links, tc.links[from][to].stats(to))
					}
					c.SawLinks(v)
				}
				// Flapping is named at once (departures and comebacks are events, not noise);
				// the other verdicts after grayConfirm.
				if first := c.Gray(); len(first) > 0 && !strings.HasSuffix(tc.want, " FLAPPING") {
					t.Errorf("gray at the first look = %v, want none before %v", first, grayConfirm)
				}
				clock = now.Add(time.Second)
				c.Gray()
				clock = now.Add(grayConfirm)
				var got []string
				for _, g := range c.Gray() {
					got = append(got, fmt.Sprintf("%s %s", g.GetNode(), g.GetKind()))
					if g.GetDetail() == "" {
						t.Errorf("%s: no detail", g.GetNode())
					}
				}
				if s := strings.Join(got, ", "); s != tc.want {
					t.Errorf("gray = %q, want %q", s, tc.want)
				}
				if self := c.GrayOf(); (self != nil) != strings.HasPrefix(tc.want, c.self+" ") {
					t.Errorf("GrayOf = %v on %s, want it gray only when it is named", self, c.self)
				}
			})
		}
	}
}

// TestGrayOneAtATime: while the verdict on one node holds, another that now looks as bad is
// not named.
func TestGrayOneAtATime(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := now
	c := grayN1(t, &clock)
	c.grayHeld["n3"] = heldVerdict{g: &kvpb.GrayNode{Node: "n3", Kind: kvpb.GrayNode_LOSS}, at: now}
	lossy := linkSpec{calls: 60, late: 6, d: time.Millisecond}
	good := linkSpec{calls: 60, d: time.Millisecond}
	lossy.feed(&c.peerState("n2").link, now)
	good.feed(&c.peerState("n3").link, now)
	c.SawLinks(&kvpb.LinkView{Node: "n2", Links: []*kvpb.LinkStats{good.stats("n2"), lossy.stats("n1"), lossy.stats("n3")}})
	c.SawLinks(&kvpb.LinkView{Node: "n3", Links: []*kvpb.LinkStats{good.stats("n3"), good.stats("n1"), lossy.stats("n2")}})
	for _, at := range []time.Duration{0, time.Second, grayConfirm} {
		clock = now.Add(at)
		c.Gray()
	}
	var got []string
	for _, g := range c.Gray() {
		got = append(got, g.GetNode())
	}
	if s := strings.Join(got, ","); s != "n3" {
		t.Errorf("gray = %q, want only the held n3", s)
	}
}

// TestFlapsCounted: a restart counts two flaps, a node stopped and started every 5 s three
// by its second departure, a death as it starts no more, and a node steady for flapQuiet
// none.
func TestFlapsCounted(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	type obs struct {
		at   float64
		down bool
	}
	for _, tc := range []struct {
		name string
		seen []obs
		look float64
		want uint32
	}{
		{"never up", []obs{{0, true}, {1, false}}, 2, 0},
		{"restart", []obs{{0, false}, {10, true}, {15, false}}, 16, 2},
		{"stopped and started every 5s", []obs{{0, false}, {10, true}, {15.5, false}, {20, true}}, 20.5, 3},
		{"dies as it starts", []obs{{0, false}, {10, true}, {15, false}, {15.2, true}, {15.4, false}}, 16, 2},
		{"settled", []obs{{0, false}, {10, true}, {15.5, false}, {20, true}, {25, false}}, 25 + flapQuiet.Seconds() + 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l link
			for _, o := range tc.seen {
				l.seen(at(o.at), o.down)
			}
			if got := l.stats(at(tc.look), "n3").GetFlaps(); got != tc.want {
				t.Errorf("flaps = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestGrayHeldKind: a held verdict takes another kind only once that kind was drawn at every
// look for grayConfirm (a fault's last figures draw a look or two of something else as they
// leave the window), and says how long ago its own figures drew it once that is heldSaid or
// more. Slow links drawn by every link's fastest call take a held loss's place at once: as
// a delay begins its mean rises before its fastest call does, which draws loss for a few
// looks (the gray drill's +200 ms delay was named 10.3 s after it began, against 10 s).
func TestGrayHeldKind(t *testing.T) {
	look := grayLossHeld(t)
	slow := linkSpec{calls: 40, d: 60 * time.Millisecond}
	if got := kind(look(3*time.Second, slow, slow)); got != "n3 LATENCY" {
		t.Errorf("the first look of slow links, the fastest call too, after held loss: %q, want n3 LATENCY", got)
	}
	look(4*time.Second, slow, slow)
	// The delay ends: slow calls linger in the window beside fast ones, which draws loss
	// ("a few calls very late"). The held latency keeps its kind until loss was drawn at
	// every look for grayConfirm.
	lingering := linkSpec{calls: 40, d: 60 * time.Millisecond, fastest: time.Millisecond}
	for _, at := range []time.Duration{5 * time.Second, 6 * time.Second} {
		if got := kind(look(at, lingering, lingering)); got != "n3 LATENCY" {
			t.Errorf("%v of lingering figures after slow links: %q, want the held n3 LATENCY", at-5*time.Second, got)
		}
	}
	gs := look(7*time.Second, lingering, lingering)
	if got := kind(gs); got != "n3 LOSS" {
		t.Errorf("lingering figures for %v: %q, want n3 LOSS", grayConfirm, got)
	}
	// The fault ends: the verdict holds, and says since when.
	gs = look(7*time.Second+heldSaid, goodLink, goodLink)
	if kind(gs) != "n3 LOSS" || !strings.Contains(gs[0].GetDetail(), "(held: drawn 2s ago)") {
		t.Errorf("held after the fault: %v, want n3 LOSS saying it was drawn 2s ago", gs)
	}
}

// goodLink is a link between healthy nodes.
var goodLink = linkSpec{calls: 40, d: time.Millisecond}

// grayLossHeld starts n1's coordinator with n3's loss drawn at every look for grayConfirm
// (held), and returns look, which draws at at (since the first look) with in and out as
// n3's links (lookN3).
func grayLossHeld(t *testing.T) func(at time.Duration, in, out linkSpec) []*kvpb.GrayNode {
	t.Helper()
	now := time.Unix(1_800_000_000, 0)
	clock := now
	c := grayN1(t, &clock)
	look := func(at time.Duration, in, out linkSpec) []*kvpb.GrayNode {
		clock = now.Add(at)
		return lookN3(c, clock, goodLink, in, out)
	}
	lossy := linkSpec{calls: 60, late: 4, d: time.Millisecond}
	for _, at := range []time.Duration{0, time.Second, 2 * time.Second} {
		look(at, lossy, lossy)
	}
	if got := kind(c.Gray()); got != "n3 LOSS" {
		t.Fatalf("after %v of loss: %q, want n3 LOSS", grayConfirm, got)
	}
	return look
}

// lookN3 feeds n1's coordinator the links at now: good between n1 and n2, in for the calls
// of n1 and n2 to n3 (n1's own calls, and n2's view), out for n3's calls to them (n3's view),
// and draws.
func lookN3(c *Coordinator, now time.Time, good, in, out linkSpec) []*kvpb.GrayNode {
	c.peerState("n2").link = link{}
	c.peerState("n3").link = link{}
	good.feed(&c.peerState("n2").link, now)
	in.feed(&c.peerState("n3").link, now)
	c.SawLinks(&kvpb.LinkView{Node: "n2", Links: []*kvpb.LinkStats{good.stats("n2"), good.stats("n1"), in.stats("n3")}})
	c.SawLinks(&kvpb.LinkView{Node: "n3", Links: []*kvpb.LinkStats{good.stats("n3"), out.stats("n1"), out.stats("n2")}})
	return c.Gray()
}

// kind is the verdicts as "node KIND", comma-separated.
func kind(gs []*kvpb.GrayNode) string {
	var out []string
	for _, g := range gs {
		out = append(out, fmt.Sprintf("%s %s", g.GetNode(), g.GetKind()))
	}
	return strings.Join(out, ", ")
}

// TestGrayCutAtOnce: as a cut begins, its failures are under half the window's calls and
// draw loss for a look or two, long enough to be held; a cut drawn then takes its place at
// the first look (every node must say the same of the node: the gray drill's inbound cut
// found n3 held "lossy" while n1 said "unreachable").
func TestGrayCutAtOnce(t *testing.T) {
	look := grayLossHeld(t)
	cut := linkSpec{calls: 40, failed: 30, d: time.Millisecond}
	if got := kind(look(3*time.Second, cut, goodLink)); got != "n3 UNREACHABLE" {
		t.Errorf("the first look of a cut after held loss: %q, want n3 UNREACHABLE", got)
	}
	// And the other way: n3's own calls fail, its peers' reach it.
	if got := kind(look(4*time.Second, goodLink, cut)); got != "n3 CUT_OFF" {
		t.Errorf("the first look of a cut the other way: %q, want n3 CUT_OFF", got)
	}
}

// TestGraySlowButFast: a node whose links are slow on average while their fastest calls are
// as fast as the others' is not "slow links": a few of its calls were very late (lost
// packets, or their figures lingering once the loss ended).
func TestGraySlowButFast(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := now
	c := grayN1(t, &clock)
	good := linkSpec{calls: 200, d: time.Millisecond}
	// 200 calls at 1 ms but for 1 of 2 s: a mean of 11 ms, no late share to speak of (0.5%).
	tail := &kvpb.LinkStats{Calls: 200, Late: 1, MeanMicros: 11_000, MinMicros: 1000}
	for _, at := range []time.Duration{0, time.Second, grayConfirm} {
		clock = now.Add(at)
		c.peerState("n2").link = link{}
		c.peerState("n3").link = link{}
		good.feed(&c.peerState("n2").link, clock)
		for range 199 {
			c.peerState("n3").link.observe(clock, time.Millisecond, false)
		}
		c.peerState("n3").link.observe(clock, 2*time.Second, false)
		t2 := proto.Clone(tail).(*kvpb.LinkStats)
		t2.Peer = "n3"
		t3 := proto.Clone(tail).(*kvpb.LinkStats)
		t3.Peer = "n1"
		t3b := proto.Clone(tail).(*kvpb.LinkStats)
		t3b.Peer = "n2"
		c.SawLinks(&kvpb.LinkView{Node: "n2", Links: []*kvpb.LinkStats{good.stats("n2"), good.stats("n1"), t2}})
		c.SawLinks(&kvpb.LinkView{Node: "n3", Links: []*kvpb.LinkStats{good.stats("n3"), t3, t3b}})
		c.Gray()
	}
	gs := c.Gray()
	if len(gs) != 1 || gs[0].GetNode() != "n3" || gs[0].GetKind() != kvpb.GrayNode_LOSS {
		t.Fatalf("gray = %v, want n3 LOSS", gs)
	}
	t.Logf("%s", kvpb.GrayLine(gs[0]))
}

// TestComebackNoted: a peer that went away and came back within flapWindow is reported with
// how long ago and how long it was away; not while it is away again, nor after flapWindow.
func TestComebackNoted(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	var l link
	l.seen(at(0), false)
	l.seen(at(10), true)
	l.seen(at(15), false)
	s := l.stats(at(20), "n3")
	if s.GetBackAgoMillis() != 5000 || s.GetAwayMillis() != 5000 {
		t.Errorf("back %d ms ago after %d ms away, want 5000 and 5000", s.GetBackAgoMillis(), s.GetAwayMillis())
	}
	if s := l.stats(at(15+flapWindow.Seconds()+1), "n3"); s.GetBackAgoMillis() != 0 {
		t.Errorf("a minute later: back %d ms ago, want none", s.GetBackAgoMillis())
	}
	l.seen(at(21), true)
	if s := l.stats(at(22), "n3"); s.GetBackAgoMillis() != 0 {
		t.Errorf("away again: back %d ms ago, want none", s.GetBackAgoMillis())
	}
}

// grayN1 is n1's coordinator in a ring of n1, n2 and n3, with the clock *clock.
func grayN1(t *testing.T, clock *time.Time) *Coordinator {
	t.Helper()
	view := &ring.View{Current: newRing(t, 1, 3, []string{"n1", "n2", "n3"})}
	c := New(Config{Now: func() time.Time { return *clock }}, "n1", func() *ring.View { return view }, nil, nil, nil, nil)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestFlappingNamedAsItGoes: a node that came back and went again is named flapping at the
// first look after its peers saw it go, though its links' last figures (late calls as it
// started) would name it lossy and its last view is younger than aliveTTL; a node that spoke
// since it went (a lost probe, not a stop) is judged by its links as before.
func TestFlappingNamedAsItGoes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		spokeLast bool // a view of n3's arrives after n1 saw it go
		want      string
	}{
		{"away since it last spoke", false, "n3 FLAPPING"},
		{"spoke since it went", true, "n3 LOSS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1_800_000_000, 0)
			at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
			clock := start
			c := grayN1(t, &clock)
			good := linkSpec{calls: 30, d: time.Millisecond}
			starting := linkSpec{calls: 30, late: 3, d: time.Millisecond} // calls to a node as it starts
			to3 := &c.peerState("n3").link
			// Up, stopped 1 s in, started 6 s in: two flaps, seen by n1 and by n2.
			to3.seen(at(0), false)
			to3.seen(at(1), true)
			to3.seen(at(6), false)
			n2view := func(flaps int) *kvpb.LinkView {
				s := starting.stats("n3")
				s.Flaps = uint32(flaps)
				return &kvpb.LinkView{Node: "n2", Links: []*kvpb.LinkStats{good.stats("n2"), good.stats("n1"), s}}
			}
			n3view := &kvpb.LinkView{Node: "n3", Links: []*kvpb.LinkStats{good.stats("n3"), good.stats("n1"), good.stats("n2")}}
			for s := 6.0; s < 11; s += 0.5 {
				clock = at(s)
				if s == float64(int(s)) {
					good.feed(&c.peerState("n2").link, clock)
					starting.feed(to3, clock)
				}
				c.SawLinks(n2view(2))
				c.SawLinks(n3view)
				c.Gray()
			}
			if got := grayKinds(c.Gray()); got != "n3 LOSS" {
				t.Fatalf("before it went again: %q, want n3 LOSS (its calls late as it started)", got)
			}
			// Gone again 11 s in: n1 sees the reconnect refused, n2 tells it has too.
			clock = at(11)
			c.setDown(c.peerState("n3"), true)
			clock = at(11.05)
			c.SawLinks(n2view(3))
			if tc.spokeLast {
				c.SawLinks(n3view)
			}
			clock = at(11.1)
			if got := grayKinds(c.Gray()); got != tc.want {
				t.Errorf("0.1 s after it went again: got %q, want %q", got, tc.want)
			}
		})
	}
}

// grayKinds is "node KIND, ..." of a verdict.
func grayKinds(gs []*kvpb.GrayNode) string {
	var out []string
	for _, g := range gs {
		out = append(out, fmt.Sprintf("%s %s", g.GetNode(), g.GetKind()))
	}
	return strings.Join(out, ", ")
}
