package oncall

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// Event is one event of the answer. Node is the first node that kept it; Nodes all those
// that kept the same event (a ring change is kept by every node, a peer's DOWN by each that
// lost it).
type Event struct {
	Time  time.Time `json:"time"`
	Node  string    `json:"node"`
	Nodes []string  `json:"nodes"`
	Kind  string    `json:"kind"`
	Text  string    `json:"text"`
}

// sameEvent is how far apart the nodes may keep one event: each stamps what it saw when it saw it.
const sameEvent = 30 * time.Second

// dedupe folds the events of the same kind and text kept by several nodes within sameEvent of
// the first into one; events are in time order.
func dedupe(evs []Event) []Event {
	out := evs[:0:0]
	for _, e := range evs {
		i := slices.IndexFunc(out, func(o Event) bool {
			return o.Kind == e.Kind && o.Text == e.Text && e.Time.Sub(o.Time) <= sameEvent && !slices.Contains(o.Nodes, e.Node)
		})
		if i < 0 {
			e.Nodes = []string{e.Node}
			out = append(out, e)
			continue
		}
		out[i].Nodes = append(out[i].Nodes, e.Node)
	}
	return out
}

// Heat is the merged answer (kvctl heat -o json): values[row][column], null where no node has
// data for the step.
type Heat struct {
	Metric      string      `json:"metric"`
	StepSeconds int         `json:"step_seconds"`
	Nodes       []string    `json:"nodes"`
	Columns     []time.Time `json:"columns"`
	Rows        []string    `json:"rows"`
	Values      [][]*uint64 `json:"values"`
	// Owners[row][column] is the node that owned most of the row's tokens at the column's end
	// (as most answering nodes saw the ring), "" when no node knows.
	Owners [][]string `json:"owners"`
	Events []Event    `json:"events"`
}

// MergeHeat sums the nodes' values per row and column (p99: the highest); a step is present when
// any node has it.
func MergeHeat(reps []*kvpb.HeatResponse, metric string) (*Heat, error) {
	res := &Heat{Metric: metric, StepSeconds: int(reps[0].GetStepSeconds()), Events: []Event{}}
	cols := map[int64]int{}
	var times []int64
	for _, r := range reps {
		if int(r.GetStepSeconds()) != res.StepSeconds {
			return nil, fmt.Errorf("nodes keep different steps (%ds on %s, %ds on %s)", res.StepSeconds, reps[0].GetNode(), r.GetStepSeconds(), r.GetNode())
		}
		for _, c := range r.GetColumnsUnixNanos() {
			if _, ok := cols[c]; !ok {
				cols[c] = 0
				times = append(times, c)
			}
		}
	}
	slices.Sort(times)
	for i, c := range times {
		cols[c] = i
		res.Columns = append(res.Columns, time.Unix(0, c).UTC())
	}
	const buckets = 256
	res.Values = make([][]*uint64, buckets)
	res.Owners = make([][]string, buckets)
	votes := make([][]map[string]int, buckets)
	for b := range buckets {
		res.Rows = append(res.Rows, fmt.Sprintf("%016x-%016x", uint64(b)<<56, uint64(b)<<56|(1<<56-1)))
		res.Values[b] = make([]*uint64, len(times))
		res.Owners[b] = make([]string, len(times))
		votes[b] = make([]map[string]int, len(times))
	}
	seen := false
	for _, r := range reps {
		res.Nodes = append(res.Nodes, r.GetNode())
		nb := int(r.GetBuckets())
		if nb != buckets || len(r.GetValues()) != nb*len(r.GetColumnsUnixNanos()) {
			return nil, fmt.Errorf("node %s answered %d values for %d columns of %d buckets", r.GetNode(), len(r.GetValues()), len(r.GetColumnsUnixNanos()), nb)
		}
		owners, names := r.GetOwners(), r.GetOwnerNames()
		if len(owners) != len(r.GetValues()) {
			owners = nil // a node that keeps no owners
		}
		for ci, c := range r.GetColumnsUnixNanos() {
			if !r.GetPresent()[ci] {
				continue
			}
			seen = true
			col := cols[c]
			for b := range buckets {
				if owners != nil {
					if o := int(owners[ci*buckets+b]); o > 0 && o <= len(names) {
						if votes[b][col] == nil {
							votes[b][col] = map[string]int{}
						}
						votes[b][col][names[o-1]]++
					}
				}
				v := r.GetValues()[ci*buckets+b]
				p := res.Values[b][col]
				switch {
				case p == nil:
					res.Values[b][col] = &v
				case metric == "p99":
					*p = max(*p, v)
				default:
					*p += v
				}
			}
		}
		for _, e := range r.GetEvents() {
			res.Events = append(res.Events, Event{Time: time.Unix(0, e.GetUnixNanos()).UTC(), Node: r.GetNode(), Kind: e.GetKind(), Text: e.GetText()})
		}
	}
	if !seen {
		from := "the window"
		if len(res.Columns) > 0 {
			from = res.Columns[0].Local().Format("2006-01-02 15:04:05")
		}
		return nil, fmt.Errorf("%w since %s: no node (%s) has history for it", ErrNoData, from, strings.Join(res.Nodes, ", "))
	}
	for b := range buckets {
		for c, vs := range votes[b] {
			best := 0
			for _, id := range slices.Sorted(maps.Keys(vs)) {
				if vs[id] > best {
					res.Owners[b][c], best = id, vs[id]
				}
			}
		}
	}
	slices.SortStableFunc(res.Events, func(a, b Event) int { return a.Time.Compare(b.Time) })
	res.Events = dedupe(res.Events)
	return res, nil
}

// RowOwners is, for the buckets lo..hi (a row of the table), the owner of most of them at each
// column ("" when no bucket's owner is known), and for each column whether any bucket's owner
// differs from the column before (both known).
func (res *Heat) RowOwners(lo, hi int) (owners []string, changed []bool) {
	for c := range res.Columns {
		n := map[string]int{}
		ch := false
		for b := lo; b <= hi && b < len(res.Owners); b++ {
			o := res.Owners[b][c]
			if o == "" {
				continue
			}
			n[o]++
			if c > 0 && res.Owners[b][c-1] != "" && res.Owners[b][c-1] != o {
				ch = true
			}
		}
		best, most := "", 0
		for _, id := range slices.Sorted(maps.Keys(n)) {
			if n[id] > most {
				best, most = id, n[id]
			}
		}
		owners = append(owners, best)
		changed = append(changed, ch)
	}
	return owners, changed
}

// HeatLabelWidth is the width of a heat row's label ("0x00-0x0f ").
const HeatLabelWidth = 10

// HeatMinWidth is the narrowest the heat table is drawn.
const HeatMinWidth = 40

// The table's glyphs: no data, zero, then four levels up to the highest value shown.
const (
	glyphNoData = '-'
	glyphZero   = '·'
)

var levels = []rune{'░', '▒', '▓', '█'}

// DrawHeat prints 16 rows (16 token buckets each) and as many columns as fit in width, merging
// adjacent steps when needed, then the time axis with the events marked, and a legend.
func DrawHeat(w io.Writer, res *Heat, width int) error {
	ncols := len(res.Columns)
	avail := width - HeatLabelWidth
	group := max(1, (ncols+avail-1)/avail)
	shown := (ncols + group - 1) / group
	const rows, per = 16, 16
	cells := make([][]*uint64, rows)
	var top uint64
	for r := range rows {
		cells[r] = make([]*uint64, shown)
		for c := range shown {
			for b := r * per; b < (r+1)*per; b++ {
				for col := c * group; col < min((c+1)*group, ncols); col++ {
					v := res.Values[b][col]
					if v == nil {
						continue
					}
					p := cells[r][c]
					switch {
					case p == nil:
						x := *v
						cells[r][c] = &x
					case res.Metric == "p99":
						*p = max(*p, *v)
					default:
						*p += *v
					}
				}
			}
			if p := cells[r][c]; p != nil {
				top = max(top, *p)
			}
		}
	}
	var sb strings.Builder
	step := time.Duration(res.StepSeconds) * time.Second * time.Duration(group)
	fmt.Fprintf(&sb, "%s per %v, token ranges by top byte (%s)\n", res.Metric, step, strings.Join(res.Nodes, ","))
	for r := range rows {
		fmt.Fprintf(&sb, "0x%02x-0x%02x ", r*per, (r+1)*per-1)
		for c := range shown {
			p := cells[r][c]
			switch {
			case p == nil:
				sb.WriteRune(glyphNoData)
			case *p == 0 || top == 0:
				sb.WriteRune(glyphZero)
			default:
				i := min(len(levels)-1, int((*p*uint64(len(levels))-1)/top))
				sb.WriteRune(levels[i])
			}
		}
		sb.WriteByte('\n')
	}
	// The time axis: the events' marks, then the first and last steps' times.
	marks := []rune(strings.Repeat(" ", shown))
	var listed []Event
	if ncols > 0 {
		first := res.Columns[0]
		for _, e := range res.Events {
			c := int(e.Time.Sub(first) / step)
			if c < 0 || c >= shown {
				continue
			}
			marks[c] = '^'
			listed = append(listed, e)
		}
		fmt.Fprintf(&sb, "%*s%s\n", HeatLabelWidth, "", string(marks))
		start := res.Columns[0].Local().Format("01-02 15:04:05")
		end := res.Columns[ncols-1].Local().Format("15:04:05")
		pad := max(1, shown-len(start)-len(end))
		fmt.Fprintf(&sb, "%*s%s%*s%s\n", HeatLabelWidth, "", start, pad, "", end)
	}
	zero := "0"
	if res.Metric == "p99" {
		zero = fmt.Sprintf("under %d ops (no p99)", kvpb.MinLatencySamples)
	}
	fmt.Fprintf(&sb, "legend: %c no data  %c %s", glyphNoData, glyphZero, zero)
	for i, g := range levels {
		fmt.Fprintf(&sb, "  %c <=%s", g, scale(res.Metric, top*uint64(i+1)/uint64(len(levels))))
	}
	sb.WriteByte('\n')
	for _, e := range listed {
		fmt.Fprintf(&sb, "^ %s %s %s: %s\n", e.Time.Local().Format("15:04:05"), strings.Join(e.Nodes, ","), e.Kind, e.Text)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func scale(metric string, v uint64) string {
	switch metric {
	case "p99":
		return fmt.Sprintf("%.1fms", float64(v)/1000)
	case "bytes":
		return present.Bytes(v)
	}
	return fmt.Sprint(v)
}

// Window returns the steps of res that overlap [from, to) and the events in it: a scrolled
// view of a longer answer.
func (res *Heat) Window(from, to time.Time) *Heat {
	out := *res
	out.Columns, out.Events = nil, []Event{}
	out.Values = make([][]*uint64, len(res.Values))
	out.Owners = make([][]string, len(res.Owners))
	step := time.Duration(res.StepSeconds) * time.Second
	var keep []int
	for i, c := range res.Columns {
		if c.Add(step).After(from) && c.Before(to) {
			keep = append(keep, i)
			out.Columns = append(out.Columns, c)
		}
	}
	for r, row := range res.Values {
		out.Values[r] = make([]*uint64, 0, len(keep))
		for _, i := range keep {
			out.Values[r] = append(out.Values[r], row[i])
		}
	}
	for r, row := range res.Owners {
		out.Owners[r] = make([]string, 0, len(keep))
		for _, i := range keep {
			out.Owners[r] = append(out.Owners[r], row[i])
		}
	}
	for _, e := range res.Events {
		if !e.Time.Before(from) && e.Time.Before(to) {
			out.Events = append(out.Events, e)
		}
	}
	return &out
}
