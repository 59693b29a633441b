package repair

import (
	"fmt"
	"io"
	"sort"
	"time"

	"ringkv/ctl/cli"
	"ringkv/ctl/follow"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// nodeProgress is a session's progress on one replica: the ranges it holds a replica of, and
// the keys it received (applied as newer than what it held).
type nodeProgress struct {
	ID                 string
	RangesDone, Ranges int
	Failed             int
	KeysIn             uint64
	LastErr            string
}

// perNode aggregates a session's ranges by replica, sorted by id.
func perNode(p *kvpb.RepairProgress) []*nodeProgress {
	by := map[string]*nodeProgress{}
	get := func(id string) *nodeProgress {
		n := by[id]
		if n == nil {
			n = &nodeProgress{ID: id}
			by[id] = n
		}
		return n
	}
	for _, r := range p.GetRanges() {
		for _, id := range r.GetRange().GetReplicas() {
			n := get(id)
			n.Ranges++
			switch r.GetState() {
			case kvpb.RangeRepairState_RANGE_REPAIR_STATE_DONE:
				n.RangesDone++
			case kvpb.RangeRepairState_RANGE_REPAIR_STATE_FAILED:
				n.RangesDone++
				n.Failed++
				n.LastErr = r.GetError()
			}
		}
		for _, pr := range r.GetPairs() {
			get(pr.GetB()).KeysIn += pr.GetKeysToB()
			get(pr.GetA()).KeysIn += pr.GetKeysToA()
		}
	}
	if len(p.GetRanges()) == 0 {
		for _, pr := range p.GetPairs() {
			get(pr.GetB()).KeysIn += pr.GetKeysToB()
			get(pr.GetA()).KeysIn += pr.GetKeysToA()
		}
	}
	out := make([]*nodeProgress, 0, len(by))
	for _, n := range by {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Renderer draws a session's progress on stderr: redrawn in place on a terminal (a header
// and a line per node, each cut to the width), one line per Every when piped. Where the node
// reports no rate or ETA, it measures the rate between updates and estimates the ETA from the
// ranges done. Not safe for concurrent use.
type Renderer struct {
	W   io.Writer
	TTY bool
	// Width is the terminal's width in columns (0 = 80).
	Width func() int
	// Every is the interval between lines when piped.
	Every time.Duration
	Now   func() time.Time

	first     time.Time // the first update
	prevAt    time.Time
	prevBytes uint64
	rate      float64
	drawing   follow.Drawing
}

// NewRenderer returns a renderer on ios.ErrOut.
func NewRenderer(ios *cli.IOStreams) *Renderer {
	return &Renderer{W: ios.ErrOut, TTY: ios.ErrTTY, Width: ios.ErrWidth, Every: time.Second, Now: time.Now}
}

// measure updates the measured rate with the bytes streamed at now.
func (r *Renderer) measure(now time.Time, bytes uint64) {
	if r.first.IsZero() {
		r.first = now
	}
	if !r.prevAt.IsZero() {
		dt := now.Sub(r.prevAt).Seconds()
		if dt <= 0.05 {
			return
		}
		if bytes >= r.prevBytes {
			inst := float64(bytes-r.prevBytes) / dt
			if r.rate == 0 {
				r.rate = inst
			} else {
				r.rate = 0.5*r.rate + 0.5*inst
			}
		}
	}
	r.prevAt, r.prevBytes = now, bytes
}

// rateETA is the rate and ETA shown: the node's when it reports them, else measured.
func (r *Renderer) rateETA(p *kvpb.RepairProgress, now time.Time) (float64, time.Duration) {
	rate := p.GetRateBytesPerSec()
	if rate <= 0 {
		rate = r.rate
	}
	if e := p.GetEtaSeconds(); e > 0 {
		return rate, time.Duration(e * float64(time.Second))
	}
	done, total := present.RepairRanges(p)
	start := r.first
	if s := p.GetStartedUnix(); s > 0 {
		start = time.Unix(s, 0)
	}
	if done == 0 || total <= done || start.IsZero() || !now.After(start) {
		return rate, 0
	}
	el := now.Sub(start)
	return rate, time.Duration(float64(el) * float64(total-done) / float64(done))
}

// Line is the header of a session's progress: the most telling first, so that a narrow
// terminal cuts the least.
func (r *Renderer) Line(p *kvpb.RepairProgress, now time.Time) string {
	rate, left := r.rateETA(p, now)
	done, total := present.RepairRanges(p)
	pct := ""
	if total > 0 {
		pct = fmt.Sprintf(" %.0f%%", min(100, 100*float64(done)/float64(total)))
	}
	return fmt.Sprintf("repair %d %s%s  ranges %d/%d  %s  ETA %s  streamed %d keys, %s  compared %d keys  throttle %s",
		p.GetId(), present.RepairPhase(p), pct, done, total, present.Rate(rate), present.Duration(left),
		p.GetKeysStreamed(), present.Bytes(p.GetBytesStreamed()), p.GetKeysCompared(), limitShort(p.GetRateLimitBytes()))
}

func limitShort(b uint64) string {
	if b == 0 {
		return "default"
	}
	return present.Rate(float64(b))
}

// Update draws p. force draws even when piped and the last line is younger than Every.
func (r *Renderer) Update(p *kvpb.RepairProgress, force bool) {
	now := r.Now()
	r.measure(now, p.GetBytesStreamed())
	head := r.Line(p, now)
	var parts, lines []string
	for _, n := range perNode(p) {
		parts = append(parts, fmt.Sprintf("%s %d/%d ranges, %d keys in", n.ID, n.RangesDone, n.Ranges, n.KeysIn))
		l := fmt.Sprintf("  %-10s ranges %d/%d  keys in %d", n.ID, n.RangesDone, n.Ranges, n.KeysIn)
		if n.Failed > 0 {
			l += fmt.Sprintf("  %d failed: %s", n.Failed, n.LastErr)
		}
		lines = append(lines, l)
	}
	r.drawing.Draw(follow.Screen{W: r.W, TTY: r.TTY, Width: r.Width, Every: r.Every}, now, force, head, parts, lines)
}

// Forget makes the next Update draw below what is on the terminal.
func (r *Renderer) Forget() { r.drawing.Forget() }
