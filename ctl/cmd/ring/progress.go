package ring

import (
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"ringkv/ctl/cli"
	"ringkv/ctl/follow"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// nodeProgress is the progress of one receiving node.
type nodeProgress struct {
	ID                    string
	RangesDone, Ranges    int
	Failed                int
	KeysDone, KeysTotal   uint64
	BytesDone, BytesTotal uint64
	Rate                  float64 // bytes per second, measured between samples
	ETA                   time.Duration
	LastErr               string
	// Stalled counts the node's ranges with no progress for its --move-stall-after; Stall
	// is the first of them.
	Stalled int
	Stall   *kvpb.MoveStall
}

// perNode aggregates a change's ranges by receiving node, sorted by id.
func perNode(p *kvpb.ChangeProgress) []*nodeProgress {
	by := map[string]*nodeProgress{}
	for _, r := range p.GetRanges() {
		id := r.GetMove().GetTarget()
		n := by[id]
		if n == nil {
			n = &nodeProgress{ID: id}
			by[id] = n
		}
		n.Ranges++
		switch r.GetState() {
		case kvpb.MoveState_MOVE_STATE_DONE:
			n.RangesDone++
		case kvpb.MoveState_MOVE_STATE_FAILED:
			n.Failed++
			n.LastErr = r.GetError()
		}
		if st := r.GetStall(); st != nil {
			if n.Stalled == 0 {
				n.Stall = st
			}
			n.Stalled++
		}
		n.KeysDone += r.GetKeysDone()
		n.BytesDone += r.GetBytesDone()
		n.KeysTotal += r.GetMove().GetEstKeys()
		n.BytesTotal += r.GetMove().GetEstBytes()
	}
	out := make([]*nodeProgress, 0, len(by))
	for _, n := range by {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// totals returns a change's bytes and keys done and total, falling back to the sum of the
// per-range estimates when the server leaves the totals unset.
func totals(p *kvpb.ChangeProgress) (keysDone, keysTotal, bytesDone, bytesTotal uint64) {
	keysDone, keysTotal, bytesDone, bytesTotal = p.GetKeysDone(), p.GetKeysTotal(), p.GetBytesDone(), p.GetBytesTotal()
	var kd, kt, bd, bt uint64
	for _, r := range p.GetRanges() {
		kd += r.GetKeysDone()
		bd += r.GetBytesDone()
		kt += r.GetMove().GetEstKeys()
		bt += r.GetMove().GetEstBytes()
	}
	if keysDone == 0 {
		keysDone = kd
	}
	if bytesDone == 0 {
		bytesDone = bd
	}
	if keysTotal == 0 {
		keysTotal = kt
	}
	if bytesTotal == 0 {
		bytesTotal = bt
	}
	if keysTotal == 0 {
		keysTotal = p.GetPlan().GetEstKeys()
	}
	if bytesTotal == 0 {
		bytesTotal = p.GetPlan().GetEstBytes()
	}
	return
}

func rangesDone(p *kvpb.ChangeProgress) (done, all int) {
	for _, r := range p.GetRanges() {
		if r.GetState() == kvpb.MoveState_MOVE_STATE_DONE {
			done++
		}
	}
	return done, len(p.GetRanges())
}

// of formats "done of total (pct)" with a humanizer; total 0 = unknown.
func of(done, total uint64, h func(uint64) string) string {
	if total == 0 {
		return h(done)
	}
	return fmt.Sprintf("%s of %s (%s)", h(done), h(total), donePct(done, total))
}

// donePct is done over total in whole percent, rounded down: 100% only when done reaches total.
func donePct(done, total uint64) string {
	return fmt.Sprintf("%.0f%%", math.Min(100, math.Floor(100*float64(done)/float64(total))))
}

// percent is " 68%" of done over total, "" when the total is unknown.
func percent(done, total uint64) string {
	if total == 0 {
		return ""
	}
	return " " + donePct(done, total)
}

func count(n uint64) string { return fmt.Sprint(n) }

// summary is a one-line account of a change: state, bytes, keys, rate, ETA.
func summary(p *kvpb.ChangeProgress) string {
	kd, kt, bd, bt := totals(p)
	rd, ra := rangesDone(p)
	s := fmt.Sprintf("%s, ranges %d/%d, %s, keys %s", present.State(p.GetState()), rd, ra, of(bd, bt, present.Bytes), of(kd, kt, count))
	if p.GetRateBytesPerSec() > 0 {
		s += ", " + present.Rate(p.GetRateBytesPerSec())
	}
	if p.GetEtaSeconds() > 0 {
		s += ", ETA " + present.ETA(p.GetEtaSeconds())
		if present.OpenPause(p) != nil {
			s += " once resumed"
		}
	}
	return s
}

// pauseLines are what a paused change shows under its summary: who paused it, when, for how
// long and why, and what it costs writes meanwhile; then the throttles the operator set,
// paused or not.
func pauseLines(p *kvpb.ChangeProgress, now time.Time) []string {
	var out []string
	if l := present.Paused(p, now); l != "" {
		out = append(out, l)
		if c := present.PendingCost(p); c != "" {
			out = append(out, "while paused, "+c)
		}
	}
	if t := present.Throttles(p); t != "" {
		out = append(out, "set by the operator: "+t)
	}
	return out
}

// sample is one observation of a node's bytes done.
type sample struct {
	at    time.Time
	bytes uint64
	rate  float64
}

// Renderer draws a change's progress on stderr: redrawn in place on a terminal, one line per
// Every when piped. It measures per-node rates from successive updates. Not safe for
// concurrent use.
type Renderer struct {
	W   io.Writer
	TTY bool
	// Width is the terminal's width in columns (0 = 80): on a terminal every line is cut to
	// fit, so that a redraw overwrites it instead of leaving the wrapped rest behind.
	Width func() int
	// Every is the interval between lines when piped.
	Every time.Duration
	Now   func() time.Time

	last    map[string]sample
	drawing follow.Drawing
}

// NewRenderer returns a renderer on ios.ErrOut.
func NewRenderer(ios *cli.IOStreams) *Renderer {
	return &Renderer{W: ios.ErrOut, TTY: ios.ErrTTY, Width: ios.ErrWidth, Every: time.Second, Now: time.Now}
}

func (r *Renderer) rate(prev sample, now time.Time, bytes uint64) sample {
	s := sample{at: now, bytes: bytes, rate: prev.rate}
	if !prev.at.IsZero() {
		if dt := now.Sub(prev.at).Seconds(); dt > 0.05 && bytes >= prev.bytes {
			inst := float64(bytes-prev.bytes) / dt
			if prev.rate == 0 {
				s.rate = inst
			} else {
				s.rate = 0.5*prev.rate + 0.5*inst // smooth the bursts of chunked streaming
			}
		} else if dt <= 0.05 {
			s = prev
		}
	}
	return s
}

// Update draws p. force draws even when piped and the last line is younger than Every.
func (r *Renderer) Update(p *kvpb.ChangeProgress, force bool) {
	now := r.Now()
	if r.last == nil {
		r.last = map[string]sample{}
	}
	nodes := perNode(p)
	for _, n := range nodes {
		s := r.rate(r.last[n.ID], now, n.BytesDone)
		r.last[n.ID] = s
		n.Rate = s.rate
		if n.Rate > 0 && n.BytesTotal > n.BytesDone {
			n.ETA = time.Duration(float64(n.BytesTotal-n.BytesDone) / n.Rate * float64(time.Second))
		}
	}
	kd, kt, bd, bt := totals(p)
	// One source for every rate and ETA on screen: the per-node rates, smoothed between
	// samples; the total is their sum, so the header agrees with the lines below it.
	var rate float64
	for _, n := range nodes {
		rate += n.Rate
	}
	var left time.Duration
	if rate > 0 && bt > bd {
		left = time.Duration(float64(bt-bd) / rate * float64(time.Second))
	}
	rd, ra := rangesDone(p)
	// What matters most comes first, so that a narrow terminal cuts the least.
	head := fmt.Sprintf("change %d %s: %s%s, %s, ETA %s, ranges %d/%d, bytes %s, keys %s, limit %s",
		p.GetId(), present.Change(p.GetPlan().GetRequest()), present.State(p.GetState()), percent(bd, bt), present.Rate(rate), present.Duration(left),
		rd, ra, of(bd, bt, present.Bytes), of(kd, kt, count), present.Limit(p.GetRateLimitBytes()))
	var parts []string
	lines := pauseLines(p, now)
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("%s %s/%s %s", n.ID, present.Bytes(n.BytesDone), humanOrQ(n.BytesTotal), present.Rate(n.Rate)))
		l := fmt.Sprintf("  -> %-10s%5s %10s  ETA %-6s ranges %d/%d  bytes %-28s keys %s",
			n.ID, percent(n.BytesDone, n.BytesTotal), present.Rate(n.Rate), present.Duration(n.ETA), n.RangesDone, n.Ranges,
			of(n.BytesDone, n.BytesTotal, present.Bytes), of(n.KeysDone, n.KeysTotal, count))
		if n.Stalled > 0 {
			l += "  " + stallNote(n)
		} else if n.Failed > 0 {
			l += fmt.Sprintf("  %d failed, retrying: %s", n.Failed, n.LastErr)
		}
		lines = append(lines, l)
	}
	// The paces and why: a line each on a terminal, parts of the one line when piped.
	for _, pc := range p.GetPaces() {
		lines = append(lines, "  "+present.Pace(pc))
		parts = append(parts, present.Pace(pc))
	}
	r.drawing.Draw(follow.Screen{W: r.W, TTY: r.TTY, Width: r.Width, Every: r.Every}, now, force, head, parts, lines)
}

// Forget makes the next Update draw below what is on the terminal.
func (r *Renderer) Forget() { r.drawing.Forget() }

func humanOrQ(n uint64) string {
	if n == 0 {
		return "?"
	}
	return present.Bytes(n)
}

// PrintProgress renders a change's progress as tables on stdout: one line per node and,
// with ranges, one per range.
func PrintProgress(ios *cli.IOStreams, p *kvpb.ChangeProgress, ranges bool) error {
	if p.GetId() == 0 || present.NoChange(p) {
		_, err := fmt.Fprintln(ios.Out, "no ring change in flight")
		return err
	}
	fmt.Fprintf(ios.Out, "change %d: %s, epoch %d -> %d\n", p.GetId(), present.Change(p.GetPlan().GetRequest()), p.GetPlan().GetFromEpoch(), p.GetPlan().GetToEpoch())
	fmt.Fprintf(ios.Out, "%s, limit %s\n", summary(p), present.Limit(p.GetRateLimitBytes()))
	for _, l := range pauseLines(p, time.Now()) {
		fmt.Fprintln(ios.Out, l)
	}
	for _, pc := range p.GetPaces() {
		fmt.Fprintln(ios.Out, present.Pace(pc))
	}
	if p.GetError() != "" {
		fmt.Fprintf(ios.Out, "error: %s\n", p.GetError())
	}
	if st := present.StalledRanges(p); st != "" {
		fmt.Fprintln(ios.Out, st)
	}
	if p.GetResumedFromBytes() > 0 || p.GetRepulledBytes() > 0 {
		fmt.Fprintf(ios.Out, "resumed from saved points: %s not pulled again; pulled twice: %s\n", present.Bytes(p.GetResumedFromBytes()), present.Bytes(p.GetRepulledBytes()))
	}
	if p.GetStartedUnix() > 0 {
		started := time.Unix(p.GetStartedUnix(), 0)
		fmt.Fprintf(ios.Out, "started %s", started.Format(time.DateTime))
		if p.GetFinishedUnix() > 0 {
			fmt.Fprintf(ios.Out, ", finished %s (%s)", time.Unix(p.GetFinishedUnix(), 0).Format(time.DateTime), time.Unix(p.GetFinishedUnix(), 0).Sub(started))
		}
		fmt.Fprintln(ios.Out)
	}
	t := cli.NewTable(ios, "RECEIVER", "RANGES", "BYTES", "KEYS", "NOTE")
	for _, n := range perNode(p) {
		note := ""
		if n.Stalled > 0 {
			note = stallNote(n)
		} else if n.Failed > 0 {
			note = fmt.Sprintf("%d failed: %s", n.Failed, n.LastErr)
		}
		t.Row(n.ID, fmt.Sprintf("%d/%d", n.RangesDone, n.Ranges), of(n.BytesDone, n.BytesTotal, present.Bytes), of(n.KeysDone, n.KeysTotal, count), note)
	}
	if err := t.Render(); err != nil {
		return err
	}
	if !ranges {
		return nil
	}
	t = cli.NewTable(ios, "RANGE", "FROM", "TO", "STATE", "BYTES", "KEYS", "ERROR")
	for _, r := range p.GetRanges() {
		m := r.GetMove()
		errText := r.GetError()
		if st := r.GetStall(); st != nil {
			errText = present.Stall(st)
		}
		t.Row(tokenRange(m.GetStart(), m.GetEnd()), m.GetSource(), m.GetTarget(), present.RangeState(r),
			of(r.GetBytesDone(), m.GetEstBytes(), present.Bytes), of(r.GetKeysDone(), m.GetEstKeys(), count), errText)
	}
	return t.Render()
}

func tokenRange(start, end uint64) string {
	return present.TokenRange(start, end)
}

// stallNote is a receiver's stalled ranges and why the first is: "2 stalled: source n1
// unreachable since ...".
func stallNote(n *nodeProgress) string {
	return fmt.Sprintf("%d %s", n.Stalled, present.Stall(n.Stall))
}
