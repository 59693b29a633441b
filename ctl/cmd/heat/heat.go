// Package heat holds `kvctl heat`: the cluster's load per token range over time, merged from
// every node's heat history, drawn as a heatmap that fits the terminal with the events on its
// time axis, or as JSON (columns, rows, values, events).
package heat

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// Metrics are the --metric names, in the order of their proto enum.
var metrics = map[string]kvpb.HeatMetric{
	"ops":    kvpb.HeatMetric_HEAT_METRIC_OPS,
	"reads":  kvpb.HeatMetric_HEAT_METRIC_READS,
	"writes": kvpb.HeatMetric_HEAT_METRIC_WRITES,
	"bytes":  kvpb.HeatMetric_HEAT_METRIC_BYTES,
	"p99":    kvpb.HeatMetric_HEAT_METRIC_P99,
	"errors": kvpb.HeatMetric_HEAT_METRIC_ERRORS,
}

// Options are heat's flags.
type Options struct {
	IO      *cli.IOStreams
	Factory *cli.Factory
	Since   time.Duration
	Metric  string
	Step    time.Duration
	Width   int
	Timeout time.Duration
	// Now is the clock the window ends at; nil = time.Now.
	Now func() time.Time
}

// labelWidth is the width of a row's label ("0x00-0x0f ").
const labelWidth = 10

// minWidth is the narrowest terminal the table is drawn on.
const minWidth = 40

// NewCmdHeat returns `kvctl heat`. runF replaces the run step in tests.
func NewCmdHeat(f *cli.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Factory: f, Since: time.Hour, Metric: "ops", Timeout: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "heat",
		Short: "Token range x time heatmap of the cluster's load, with events on the time axis",
		Long: `Draw the load of the token space over time, summed over every answering node (what
each coordinated): rows are token ranges (the table groups the 256 ranges of a token's top
byte by 16; JSON keeps all 256), columns are time steps. Each node keeps 10 s steps for an
hour, 1 min steps for a day and 10 min steps for a week, and saves them in its data directory;
a step no node saw (all down, or before their history) is "no data" (- in the table, null in
JSON), not zero. p99 is the higher of the read and write p99 (the highest over the nodes and
finer steps: a bound), from a histogram of 8 bins per power of two (at most 12.5% high).

Without --step, the finest step whose history reaches --since. The table fits the terminal
(--width to choose): adjacent steps are merged when there are more than columns.`,
		Example: `  kvctl heat
  kvctl heat --since 24h --metric p99
  kvctl heat --since 10m --step 10s -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&o.Since, "since", o.Since, "how far back (up to 168h)")
	fl.StringVar(&o.Metric, "metric", o.Metric, "ops, reads, writes, bytes, p99 or errors")
	fl.DurationVar(&o.Step, "step", 0, "10s, 1m or 10m (default: the finest that reaches --since)")
	fl.IntVar(&o.Width, "width", 0, "draw the table this many columns wide (default: the terminal's, 100 when piped)")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of the calls to the nodes")
	_ = cmd.RegisterFlagCompletionFunc("metric", cobra.FixedCompletions([]string{"ops", "reads", "writes", "bytes", "p99", "errors"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("step", cobra.FixedCompletions([]string{"10s", "1m", "10m"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *Options) validate() error {
	switch _, ok := metrics[o.Metric]; {
	case !ok:
		return cli.UsageErrorf("--metric %q: want ops, reads, writes, bytes, p99 or errors", o.Metric)
	case o.Since <= 0 || o.Since > 7*24*time.Hour:
		return cli.UsageErrorf("--since %v: want more than 0 and up to 168h", o.Since)
	case o.Step != 0 && o.Step != 10*time.Second && o.Step != time.Minute && o.Step != 10*time.Minute:
		return cli.UsageErrorf("--step %v: want 10s, 1m or 10m", o.Step)
	case o.Width < 0:
		return cli.UsageErrorf("--width %d: want a positive width", o.Width)
	case o.Timeout <= 0:
		return cli.UsageErrorf("--timeout must be positive")
	}
	return nil
}

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

// Result is the answer of kvctl heat -o json: values[row][column], null where no node has
// data for the step.
type Result struct {
	Metric      string      `json:"metric"`
	StepSeconds int         `json:"step_seconds"`
	Nodes       []string    `json:"nodes"`
	Columns     []time.Time `json:"columns"`
	Rows        []string    `json:"rows"`
	Values      [][]*uint64 `json:"values"`
	Events      []Event     `json:"events"`
}

func (o *Options) width() int {
	switch {
	case o.Width > 0:
		return o.Width
	case o.IO.OutWidth != nil && o.IO.OutWidth() > 0:
		return o.IO.OutWidth()
	}
	return 100
}

func run(ctx context.Context, o *Options) error {
	if w := o.width(); !o.Factory.JSON() && w < minWidth {
		return cli.UsageErrorf("the terminal is %d columns wide: the heat table needs %d (widen it, or use --width or -o json)", w, minWidth)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	ac, err := o.Factory.Admin("")
	if err != nil {
		return err
	}
	st, err := ac.Status(ctx, &kvpb.StatusRequest{})
	if err != nil {
		return cli.RPCError(o.Factory.Addr, err)
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	req := &kvpb.HeatRequest{SinceUnixNanos: now().Add(-o.Since).UnixNano(), StepSeconds: uint32(o.Step / time.Second), Metric: metrics[o.Metric]}
	var reps []*kvpb.HeatResponse
	for _, n := range st.GetNodes() {
		if n.GetError() != "" {
			fmt.Fprintf(o.IO.ErrOut, "skipping %s: %s\n", n.GetId(), n.GetError())
			continue
		}
		c, err := o.Factory.Admin(n.GetGrpcAddr())
		if err != nil {
			return err
		}
		r, err := c.Heat(ctx, req)
		if err != nil {
			fmt.Fprintf(o.IO.ErrOut, "skipping %s: %s\n", n.GetId(), present.RPC(err))
			continue
		}
		reps = append(reps, r)
	}
	if len(reps) == 0 {
		return fmt.Errorf("no node of the ring answers")
	}
	res, err := merge(reps, o.Metric)
	if err != nil {
		return err
	}
	if o.Factory.JSON() {
		return cli.PrintJSON(o.IO.Out, res)
	}
	return draw(o.IO.Out, res, o.width())
}

// merge sums the nodes' values per row and column (p99: the highest); a step is present when
// any node has it.
func merge(reps []*kvpb.HeatResponse, metric string) (*Result, error) {
	res := &Result{Metric: metric, StepSeconds: int(reps[0].GetStepSeconds()), Events: []Event{}}
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
	for b := range buckets {
		res.Rows = append(res.Rows, fmt.Sprintf("%016x-%016x", uint64(b)<<56, uint64(b)<<56|(1<<56-1)))
		res.Values[b] = make([]*uint64, len(times))
	}
	seen := false
	for _, r := range reps {
		res.Nodes = append(res.Nodes, r.GetNode())
		nb := int(r.GetBuckets())
		if nb != buckets || len(r.GetValues()) != nb*len(r.GetColumnsUnixNanos()) {
			return nil, fmt.Errorf("node %s answered %d values for %d columns of %d buckets", r.GetNode(), len(r.GetValues()), len(r.GetColumnsUnixNanos()), nb)
		}
		for ci, c := range r.GetColumnsUnixNanos() {
			if !r.GetPresent()[ci] {
				continue
			}
			seen = true
			col := cols[c]
			for b := range buckets {
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
		return nil, fmt.Errorf("%w: no data since %s: no node (%s) has history for it", cli.ErrNotFound, from, strings.Join(res.Nodes, ", "))
	}
	slices.SortStableFunc(res.Events, func(a, b Event) int { return a.Time.Compare(b.Time) })
	res.Events = dedupe(res.Events)
	return res, nil
}

// The table's glyphs: no data, zero, then four levels up to the highest value shown.
const (
	glyphNoData = '-'
	glyphZero   = '·'
)

var levels = []rune{'░', '▒', '▓', '█'}

// draw prints 16 rows (16 token buckets each) and as many columns as fit in width, merging
// adjacent steps when needed, then the time axis with the events marked, and a legend.
func draw(w io.Writer, res *Result, width int) error {
	ncols := len(res.Columns)
	avail := width - labelWidth
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
		fmt.Fprintf(&sb, "%*s%s\n", labelWidth, "", string(marks))
		start := res.Columns[0].Local().Format("01-02 15:04:05")
		end := res.Columns[ncols-1].Local().Format("15:04:05")
		pad := max(1, shown-len(start)-len(end))
		fmt.Fprintf(&sb, "%*s%s%*s%s\n", labelWidth, "", start, pad, "", end)
	}
	fmt.Fprintf(&sb, "legend: %c no data  %c 0", glyphNoData, glyphZero)
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
