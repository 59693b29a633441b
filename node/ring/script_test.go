package ring

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/cockroachdb/datadriven"
)

// TestScripts runs the ring-plan scripts in testdata/ (cockroachdb/datadriven). Each file starts
// from no ring; rewrite the expected output after a deliberate change with
// `go test ./node/ring -run TestScripts -rewrite` and read the diff.
//
// Commands:
//
//	ring nodes=(n1,n2,n3) vnodes=4 replicas=3   founders' ring (FounderTokens), epoch 1
//	ring replicas=2                             hand-placed tokens, one "id token..." line each
//	ranges                                      every vnode: range, owner, replica set
//	plan add ID [vnodes=4] [weight=1] [tokens=(0x6000000000000000)]
//	plan remove ID
//	plan move tokens=(n1.0->n2, n2.1@n1->n3)    hand vnodes over: ID.i is ID's i-th token (or a
//	                                            token number), @FROM claims another owner
//	rebalance [base=10] [hot=(n1.0, ...)] [factor=40] [skew=n1] [skew-factor=3] [max-moves=8]
//	commit                                      the last plan's ring becomes the ring
//
// A plan prints its range moves, the share of the ring they stream and every member's primary
// and replica ownership before -> after; a refused plan prints the error and the sentinel it
// wraps. Every plan is also checked against Plan's contract (checkPlan).
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := &ringScript{}
		datadriven.RunTest(t, path, s.run)
	})
}

type ringScript struct {
	cur, next *Ring
}

func (s *ringScript) run(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "ring" && s.cur == nil {
		d.Fatalf(t, "%s: no ring yet", d.Cmd)
	}
	switch d.Cmd {
	case "ring":
		r, err := scriptRing(t, d)
		if err != nil {
			return errLine(err)
		}
		s.cur, s.next = r, nil
		return showRing(r)
	case "ranges":
		return showRanges(s.cur)
	case "plan":
		next, err := s.plan(t, d)
		if err != nil {
			s.next = nil
			return errLine(err)
		}
		s.next = next
		moves := Plan(s.cur, next)
		checkPlan(t, s.cur, next, moves)
		return showPlan(s.cur, next, moves)
	case "rebalance":
		return s.rebalance(t, d)
	case "commit":
		if s.next == nil {
			d.Fatalf(t, "commit: no plan")
		}
		s.cur, s.next = s.next, nil
		return showRing(s.cur)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// scriptRing builds the ring of a "ring" command.
func scriptRing(t *testing.T, d *datadriven.TestData) (*Ring, error) {
	replicas := 3
	d.MaybeScanArgs(t, "replicas", &replicas)
	if d.HasArg("nodes") {
		vnodes := 4
		d.MaybeScanArgs(t, "vnodes", &vnodes)
		ids := vals(d, "nodes")
		toks := FounderTokens(ids, vnodes)
		ms := make([]Member, len(ids))
		for i, id := range ids {
			ms[i] = Member{ID: id, Tokens: toks[id]}
		}
		return New(1, replicas, ms)
	}
	var ms []Member
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			d.Fatalf(t, "member line %q: want \"id token...\"", line)
		}
		m := Member{ID: f[0]}
		for _, s := range f[1:] {
			m.Tokens = append(m.Tokens, parseToken(t, d, s))
		}
		ms = append(ms, m)
	}
	return New(1, replicas, ms)
}

// vals is an argument's values: key=(a, b).
func vals(d *datadriven.TestData, key string) []string {
	arg, _ := d.Arg(key)
	return arg.Vals
}

func parseToken(t *testing.T, d *datadriven.TestData, s string) uint64 {
	tok, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		d.Fatalf(t, "token %q: %v", s, err)
	}
	return tok
}

// vnodeToken resolves "ID.i", the i-th token (in token order) of member ID.
func vnodeToken(t *testing.T, d *datadriven.TestData, r *Ring, name string) uint64 {
	id, idx, ok := strings.Cut(name, ".")
	i, err := strconv.Atoi(idx)
	m, found := r.Member(id)
	if !ok || err != nil || !found || i < 0 || i >= len(m.Tokens) {
		d.Fatalf(t, "vnode %q: want ID.i naming a member's token", name)
	}
	return m.Tokens[i]
}

// vnodeName is the "ID.i" name of the vnode at token tok in r.
func vnodeName(r *Ring, tok uint64) string {
	rg := r.Ranges()[r.RangeIndex(tok)]
	m, _ := r.Member(rg.Owner)
	return fmt.Sprintf("%s.%d", rg.Owner, slices.Index(m.Tokens, tok))
}

func (s *ringScript) plan(t *testing.T, d *datadriven.TestData) (*Ring, error) {
	if len(d.CmdArgs) < 1 {
		d.Fatalf(t, "plan: want add, remove or move")
	}
	switch kind := d.CmdArgs[0].Key; kind {
	case "add", "remove":
		if len(d.CmdArgs) < 2 || len(d.CmdArgs[1].Vals) > 0 {
			d.Fatalf(t, "plan %s: want a member id", kind)
		}
		id := d.CmdArgs[1].Key
		if kind == "remove" {
			return s.cur.WithoutMember(id)
		}
		vnodes, weight := 4, 0
		d.MaybeScanArgs(t, "vnodes", &vnodes)
		d.MaybeScanArgs(t, "weight", &weight)
		m := Member{ID: id, Weight: weight}
		for _, tok := range vals(d, "tokens") {
			m.Tokens = append(m.Tokens, parseToken(t, d, tok))
		}
		return s.cur.WithMember(m, vnodes)
	case "move":
		var moves []TokenMove
		for _, mv := range vals(d, "tokens") {
			vnode, to, ok := strings.Cut(mv, "->")
			if !ok {
				d.Fatalf(t, "token move %q: want VNODE[@FROM]->TO", mv)
			}
			vnode, from, named := strings.Cut(vnode, "@")
			var tok uint64
			if owner, _, isName := strings.Cut(vnode, "."); isName {
				tok = vnodeToken(t, d, s.cur, vnode)
				if !named {
					from = owner
				}
			} else {
				tok = parseToken(t, d, vnode)
			}
			moves = append(moves, TokenMove{Token: tok, From: from, To: to})
		}
		return s.cur.WithTokensMoved(moves)
	default:
		d.Fatalf(t, "plan %s: want add, remove or move", kind)
		return nil, nil
	}
}

// rebalance models a measured load, runs PlanRebalance on it and prints the vnodes it hands
// over and the load per member before and after (PredictLoad). The load of a range is base
// times its size in vnodes of the ring (an average vnode serves base), spread evenly over its
// replicas; the hot vnodes serve factor times that, and the skewed member serves skew-factor
// times its share on every range (a node that coordinates more reads its own copy first).
func (s *ringScript) rebalance(t *testing.T, d *datadriven.TestData) string {
	r := s.cur
	base, factor, skewFactor := 10.0, 40.0, 3.0
	var skew string
	cfg := DefaultRebalanceConfig()
	d.MaybeScanArgs(t, "base", &base)
	d.MaybeScanArgs(t, "factor", &factor)
	d.MaybeScanArgs(t, "skew", &skew)
	d.MaybeScanArgs(t, "skew-factor", &skewFactor)
	d.MaybeScanArgs(t, "max-moves", &cfg.MaxMoves)
	hot := map[uint64]bool{}
	for _, v := range vals(d, "hot") {
		hot[vnodeToken(t, d, r, v)] = true
	}
	load := RangeLoad{}
	for _, rg := range r.Ranges() {
		l := base * rg.Fraction() * float64(r.Vnodes())
		if hot[rg.End] {
			l *= factor
		}
		set := r.Lookup(rg.End, r.Replicas())
		load[rg.End] = map[string]float64{}
		for _, m := range set {
			ml := l / float64(len(set))
			if m.ID == skew {
				ml *= skewFactor
			}
			load[rg.End][m.ID] = ml
		}
	}

	moves, next, err := PlanRebalance(r, load, cfg)
	if err != nil {
		return errLine(err)
	}
	again, _, _ := PlanRebalance(r, load, cfg)
	if !slices.Equal(again, moves) {
		t.Fatalf("second plan of the same load: got %v, want %v", again, moves)
	}
	before := PredictLoad(r, r, load)
	var b strings.Builder
	fmt.Fprintf(&b, "load before: %s\n", showLoad(r, before))
	if len(moves) == 0 {
		if next != nil {
			t.Fatalf("no moves: got next ring %v, want nil", next)
		}
		s.next = nil
		_, top, mean := loadStats(r, before)
		if top <= mean*(1+cfg.Tolerance) {
			fmt.Fprintf(&b, "no moves: the most loaded member is within %.0f%% of the mean\n", 100*cfg.Tolerance)
		} else {
			b.WriteString("no moves: no vnode move lowers the most loaded member\n")
		}
		return b.String()
	}
	if len(moves) > cfg.MaxMoves {
		t.Fatalf("got %d moves, want at most %d", len(moves), cfg.MaxMoves)
	}
	s.next = next
	fmt.Fprintf(&b, "epoch %d -> %d, vnodes handed over:\n", r.Epoch(), next.Epoch())
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, mv := range moves {
		if owner := r.Ranges()[r.RangeIndex(mv.Token)].Owner; owner != mv.From {
			t.Fatalf("move %+v: got owner %s in the current ring, want %s", mv, owner, mv.From)
		}
		if owner := next.Ranges()[next.RangeIndex(mv.Token)].Owner; owner != mv.To {
			t.Fatalf("move %+v: got owner %s in the next ring, want %s", mv, owner, mv.To)
		}
		vl := 0.0
		for _, l := range load[mv.Token] {
			vl += l
		}
		fmt.Fprintf(w, "  %s\t%#x\t%s -> %s\tvnode load %.1f\n", vnodeName(r, mv.Token), mv.Token, mv.From, mv.To, vl)
	}
	w.Flush()
	after := PredictLoad(r, next, load)
	fmt.Fprintf(&b, "load after:  %s\n", showLoad(next, after))
	ranges := Plan(r, next)
	checkPlan(t, r, next, ranges)
	fmt.Fprintf(&b, "streams %s of the ring in %s\n", pct(MovedFraction(ranges)), plural(len(ranges), "range move"))
	return b.String()
}

// loadStats is the most loaded member, its load and the mean over r's members.
func loadStats(r *Ring, load map[string]float64) (hot string, top, mean float64) {
	top = -1
	for _, m := range r.Members() {
		mean += load[m.ID]
		if load[m.ID] > top {
			hot, top = m.ID, load[m.ID]
		}
	}
	return hot, top, mean / float64(len(r.Members()))
}

func showLoad(r *Ring, load map[string]float64) string {
	var parts []string
	total := 0.0
	for _, m := range r.Members() {
		parts = append(parts, fmt.Sprintf("%s %.1f", m.ID, load[m.ID]))
		total += load[m.ID]
	}
	hot, top, mean := loadStats(r, load)
	return fmt.Sprintf("%s (total %.1f, most %s at %.2fx the mean)", strings.Join(parts, ", "), total, hot, top/mean)
}

func showRing(r *Ring) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d: %s, %s, %s per range (N=%d)\n", r.Epoch(), plural(len(r.Members()), "member"),
		plural(r.Vnodes(), "vnode"), plural(r.Replicas(), "replica"), r.ReplicationFactor())
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "member\tstate\tvnodes\tprimary\treplica")
	own, rep := r.Ownership(), r.ReplicaOwnership()
	for _, m := range r.Members() {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", m.ID, m.State, len(m.Tokens), pct(own[m.ID]), pct(rep[m.ID]))
	}
	w.Flush()
	return b.String()
}

func showRanges(r *Ring) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, rg := range r.Ranges() {
		set := ids(r.Lookup(rg.End, r.Replicas()))
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", FormatRange(rg.Start, rg.End), vnodeName(r, rg.End), pct(rg.Fraction()), strings.Join(set, ","))
	}
	w.Flush()
	return b.String()
}

func showPlan(cur, next *Ring, moves []Move) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d -> %d: %s, %s of the ring\n", cur.Epoch(), next.Epoch(), plural(len(moves), "move"), pct(MovedFraction(moves)))
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, m := range moves {
		rg := FormatRange(m.Start, m.End)
		if m.Start == m.End {
			rg = "the whole ring"
		}
		fmt.Fprintf(w, "  %s\t%s -> %s\t%s\n", rg, m.Source, m.Target, pct(m.Fraction()))
	}
	w.Flush()
	if cur.Replicas() != next.Replicas() {
		fmt.Fprintf(&b, "replicas per range %d -> %d (N=%d)\n", cur.Replicas(), next.Replicas(), next.ReplicationFactor())
	}
	w = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "member\tprimary\treplica")
	ownB, repB := cur.Ownership(), cur.ReplicaOwnership()
	ownA, repA := next.Ownership(), next.ReplicaOwnership()
	var members []string
	for _, r := range []*Ring{cur, next} {
		for _, m := range r.Members() {
			members = append(members, m.ID)
		}
	}
	slices.Sort(members)
	for _, id := range slices.Compact(members) {
		fmt.Fprintf(w, "%s\t%s -> %s\t%s -> %s\n", id, share(ownB, id), share(ownA, id), share(repB, id), share(repA, id))
	}
	w.Flush()
	return b.String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 2, 64) + "%" }

// share is a member's share, "-" when it is not in the ring.
func share(m map[string]float64, id string) string {
	f, ok := m[id]
	if !ok {
		return "-"
	}
	return pct(f)
}

// errLine prints an error and the package sentinels it wraps.
func errLine(err error) string {
	var names []string
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrNoMembers", ErrNoMembers}, {"ErrInvalidMember", ErrInvalidMember},
		{"ErrDuplicateMember", ErrDuplicateMember}, {"ErrDuplicateToken", ErrDuplicateToken},
		{"ErrInvalidReplicas", ErrInvalidReplicas}, {"ErrInvalidVnodes", ErrInvalidVnodes},
		{"ErrUnknownMember", ErrUnknownMember}, {"ErrLastMember", ErrLastMember},
		{"ErrRingFull", ErrRingFull},
	} {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	return fmt.Sprintf("error: %v [%s]\n", err, strings.Join(names, ", "))
}
