package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/hashicorp/raft"

	"ringkv/node/ring"
)

// TestScripts runs the ring-change scripts in testdata/ (cockroachdb/datadriven) against the raft
// state machine itself: each command is one journal entry handed to fsm.Apply, as raft hands it
// on every node, and the output is what readers then see (the view, the change in flight, the
// last change). Each file starts from an empty FSM. Rewrite the expected output after a
// deliberate change with `go test ./node/cluster -run TestScripts -rewrite` and read the diff.
//
// Commands:
//
//	bootstrap nodes=(a,b,c) vnodes=2 replicas=3   journal the founders' ring (founderRing)
//	plan add ID [addr=ID:1] | plan remove ID | plan rebalance tokens=(a.0->b, ...)
//	                                            Cluster.Plan on this node's view: moves, refusals
//	begin [from-epoch=E] [force] [rate=B]       journal the last plan as a change (the leader
//	                                            checks refusals before it proposes; the FSM does not)
//	range-done change=ID move=(0, 1)            one entry per move: its receiver has the range
//	commit [change=ID]                          flip the ring to the change's next epoch
//	abort [change=ID]                           drop the change; the ring stays
//	set-rate bytes=B                            the change's streaming throttle
//	replay                                      raft hands the last entry again (a restart)
//	apply op=OP                                 a raw command (e.g. one no version knows)
//	state                                       print the state
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := &fsmScript{f: newFSM(filepath.Join(t.TempDir(), "ring.json"), slog.New(slog.DiscardHandler))}
		datadriven.RunTest(t, path, s.run)
	})
}

type fsmScript struct {
	f      *fsm
	vnodes int
	index  uint64
	last   []byte // the last entry applied
	plan   *Plan
}

func (s *fsmScript) run(t *testing.T, d *datadriven.TestData) string {
	var out []string
	switch d.Cmd {
	case "bootstrap":
		cfg := Config{Replicas: 3, Vnodes: 2}
		d.MaybeScanArgs(t, "replicas", &cfg.Replicas)
		d.MaybeScanArgs(t, "vnodes", &cfg.Vnodes)
		for _, id := range vals(d, "nodes") {
			cfg.Peers = append(cfg.Peers, Peer{ID: id, Addr: id + ":1"})
		}
		r, err := founderRing(cfg)
		if err != nil {
			d.Fatalf(t, "founders' ring: %v", err)
		}
		if s.vnodes == 0 {
			s.vnodes = cfg.Vnodes
		}
		st := ringStateOf(r)
		out = append(out, s.apply(t, command{Op: opBootstrap, Ring: &st}))
	case "plan":
		return s.planCmd(t, d)
	case "begin":
		ch := &Change{Kind: KindAdd} // without a plan: a change with no ring to go to
		if p := s.plan; p != nil {
			req := p.Request
			ch = &Change{
				Kind: req.Kind, NodeID: req.NodeID, Addr: req.Addr, Tokens: slices.Clone(req.Tokens),
				FromEpoch: p.Current.Epoch(), Next: ringStateOf(p.Next),
			}
			for _, m := range p.Moves {
				ch.Moves = append(ch.Moves, MoveState{Start: m.Start, End: m.End, Source: m.Source, Target: m.Target})
			}
		}
		ch.Force = d.HasArg("force")
		d.MaybeScanArgs(t, "from-epoch", &ch.FromEpoch)
		d.MaybeScanArgs(t, "rate", &ch.RateBytes)
		out = append(out, s.apply(t, command{Op: opBegin, Change: ch}))
	case "range-done":
		var id uint64
		d.ScanArgs(t, "change", &id)
		for _, v := range vals(d, "move") {
			m, err := strconv.Atoi(v)
			if err != nil {
				d.Fatalf(t, "move %q: %v", v, err)
			}
			out = append(out, fmt.Sprintf("move %d: %s", m, s.apply(t, command{Op: opMoveDone, ChangeID: id, Move: m})))
		}
	case "commit", "abort":
		var id uint64
		d.MaybeScanArgs(t, "change", &id)
		op := opCommit
		if d.Cmd == "abort" {
			op = opAbort
		}
		out = append(out, s.apply(t, command{Op: op, ChangeID: id}))
	case "set-rate":
		var rate uint64
		d.ScanArgs(t, "bytes", &rate)
		out = append(out, s.apply(t, command{Op: opSetRate, RateBytes: rate}))
	case "replay":
		res, _ := s.f.Apply(&raft.Log{Index: s.index, Type: raft.LogCommand, Data: s.last}).(applyResult)
		out = append(out, result(res))
	case "apply":
		var op string
		d.ScanArgs(t, "op", &op)
		out = append(out, s.apply(t, command{Op: op}))
	case "state":
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return strings.Join(append(out, s.show()), "\n")
}

// apply journals cmd at the next index, stamped with the index as its time.
func (s *fsmScript) apply(t *testing.T, cmd command) string {
	t.Helper()
	s.index++
	cmd.Unix = int64(s.index)
	b, err := json.Marshal(cmd)
	if err != nil {
		t.Fatalf("encode %s: %v", cmd.Op, err)
	}
	s.last = b
	res, _ := s.f.Apply(&raft.Log{Index: s.index, Type: raft.LogCommand, Data: b}).(applyResult)
	return result(res)
}

func result(res applyResult) string {
	switch {
	case res.err != nil:
		return errLine(res.err)
	case res.changeID != 0:
		return fmt.Sprintf("ok: change %d", res.changeID)
	}
	return "ok"
}

// planCmd runs Cluster.Plan against the FSM's view, as the node that receives a change does.
func (s *fsmScript) planCmd(t *testing.T, d *datadriven.TestData) string {
	if len(d.CmdArgs) < 1 {
		d.Fatalf(t, "plan: want add, remove or rebalance")
	}
	req := ChangeRequest{Kind: d.CmdArgs[0].Key}
	if len(d.CmdArgs) > 1 && len(d.CmdArgs[1].Vals) == 0 {
		req.NodeID = d.CmdArgs[1].Key
	}
	if req.Kind == KindAdd {
		req.Addr = req.NodeID + ":1"
		d.MaybeScanArgs(t, "addr", &req.Addr)
	}
	if v := s.f.load().view; v != nil {
		for _, mv := range vals(d, "tokens") {
			req.Tokens = append(req.Tokens, tokenMove(t, d, v.Current, mv))
		}
	}
	c := &Cluster{fsm: s.f, cfg: Config{Vnodes: s.vnodes}}
	p, err := c.Plan(req)
	if err != nil {
		s.plan = nil
		return errLine(err)
	}
	s.plan = p
	var b strings.Builder
	fmt.Fprintf(&b, "%s: epoch %d -> %d, moves: %d\n", describe(req), p.Current.Epoch(), p.Next.Epoch(), len(p.Moves))
	for i, m := range p.Moves {
		fmt.Fprintf(&b, "  %s\n", moveLine(i, MoveState{Start: m.Start, End: m.End, Source: m.Source, Target: m.Target}))
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	for _, r := range p.Refusals {
		fmt.Fprintf(&b, "refused: %s\n", r)
	}
	return b.String()
}

// tokenMove parses "ID.i->TO": member ID's i-th token (in token order) handed to TO.
func tokenMove(t *testing.T, d *datadriven.TestData, r *ring.Ring, s string) ring.TokenMove {
	from, to, ok := strings.Cut(s, "->")
	id, idx, ok2 := strings.Cut(from, ".")
	i, err := strconv.Atoi(idx)
	m, found := r.Member(id)
	if !ok || !ok2 || err != nil || !found || i < 0 || i >= len(m.Tokens) {
		d.Fatalf(t, "token move %q: want ID.i->TO naming a member's token", s)
	}
	return ring.TokenMove{Token: m.Tokens[i], From: id, To: to}
}

// vals is an argument's values: key=(a, b).
func vals(d *datadriven.TestData, key string) []string {
	arg, _ := d.Arg(key)
	return arg.Vals
}

// show prints what readers of the FSM see.
func (s *fsmScript) show() string {
	p := s.f.load()
	var b strings.Builder
	if p.view == nil {
		b.WriteString("no ring\n")
		return b.String()
	}
	id := p.view.ID()
	fmt.Fprintf(&b, "view: epoch %d, change %d", id.Epoch, id.Change)
	if id.InFlight {
		b.WriteString(", in flight")
	}
	fmt.Fprintf(&b, "\nring: %s\n", members(p.view.Current))
	if ch := p.change; ch != nil {
		forced := ""
		if ch.Force {
			forced = " (forced)"
		}
		fmt.Fprintf(&b, "change %d in flight: %s%s, epoch %d -> %d, begun at %d, rate %d, pending %d of %d\n",
			ch.ID, describeChange(ch), forced, ch.FromEpoch, ch.Next.Epoch, ch.StartedUnix, ch.RateBytes, ch.Pending(), len(ch.Moves))
		for i, m := range ch.Moves {
			fmt.Fprintf(&b, "  %s\n", moveLine(i, m))
		}
		if p.view.Next == nil {
			b.WriteString("next: none\n")
		} else {
			fmt.Fprintf(&b, "next: %s\n", members(p.view.Next))
		}
	}
	if ch := p.last; ch != nil {
		fmt.Fprintf(&b, "last: change %d %s %s, epoch %d -> %d, begun at %d, finished at %d\n",
			ch.ID, describeChange(ch), ch.Outcome, ch.FromEpoch, ch.Next.Epoch, ch.StartedUnix, ch.FinishedUnix)
	}
	return b.String()
}

// members prints a ring as "epoch E, N=3: a UP, b LEAVING".
func members(r *ring.Ring) string {
	var ms []string
	for _, m := range r.Members() {
		ms = append(ms, fmt.Sprintf("%s %s", m.ID, m.State))
	}
	return fmt.Sprintf("epoch %d, N=%d: %s", r.Epoch(), r.ReplicationFactor(), strings.Join(ms, ", "))
}

func describe(req ChangeRequest) string {
	return describeChange(&Change{Kind: req.Kind, NodeID: req.NodeID, Tokens: req.Tokens})
}

func describeChange(ch *Change) string {
	if ch.Kind != KindRebalance {
		return ch.Kind + " " + ch.NodeID
	}
	var ts []string
	for _, t := range ch.Tokens {
		ts = append(ts, fmt.Sprintf("%#x %s->%s", t.Token, t.From, t.To))
	}
	return "rebalance " + strings.Join(ts, ", ")
}

func moveLine(i int, m MoveState) string {
	done := "pending"
	if m.Done {
		done = "done"
	}
	return fmt.Sprintf("%d: %s %s -> %s %s", i, ring.FormatRange(m.Start, m.End), m.Source, m.Target, done)
}

// errLine prints an error and the sentinels it wraps.
func errLine(err error) string {
	var names []string
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrChangeInFlight", ErrChangeInFlight}, {"ErrNoChange", ErrNoChange}, {"ErrUnsafe", ErrUnsafe},
		{"ErrMemberExists", ErrMemberExists}, {"ErrUnknownMember", ErrUnknownMember}, {"ErrNoRing", ErrNoRing},
		{"ErrInvalidArgument", ErrInvalidArgument},
		{"ring.ErrInvalidMember", ring.ErrInvalidMember}, {"ring.ErrUnknownMember", ring.ErrUnknownMember},
		{"ring.ErrLastMember", ring.ErrLastMember}, {"ring.ErrDuplicateToken", ring.ErrDuplicateToken},
	} {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	return fmt.Sprintf("error: %v [%s]", err, strings.Join(names, ", "))
}
