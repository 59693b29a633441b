package loadgen

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram geometry of every latency histogram: nanoseconds from 1µs to one hour, 3 significant
// digits (the lowest discernible value of 1µs keeps the memory of a microsecond histogram).
const (
	histLowest  = int64(time.Microsecond)
	histHighest = int64(time.Hour)
	histDigits  = 3
)

// NewHistogram returns an empty dense histogram with loadgen's geometry (values in ns).
func NewHistogram() *hdr.Histogram { return hdr.New(histLowest, histHighest, histDigits) }

func newPacked() *hdr.PackedHistogram { return hdr.NewPacked(histLowest, histHighest, histDigits) }

func record(h *hdr.PackedHistogram, d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	} else if v > histHighest {
		v = histHighest
	}
	_ = h.RecordValue(v) // v is within the trackable range
}

// Interval summarizes one second of a run (the last one may be shorter).
type Interval struct {
	// Start and End are offsets from the start of the run (warmup included).
	Start, End time.Duration
	// Warmup tells whether the interval lies (mostly) in the warmup.
	Warmup bool
	// Requests completed in the interval; Errors among them.
	Requests, Errors int64
	// Rate is Requests per second of the interval.
	Rate float64
	// P50, P99 and Max of the corrected latency in the interval.
	P50, P99, Max time.Duration
	// SendLag is the largest send lag seen in the interval: how late the generator sent.
	SendLag time.Duration
	// Hist is the corrected latency histogram of the interval; set in Result.Intervals only.
	Hist *hdr.PackedHistogram `json:"-"`
}

// cell is one worker's counters for one (op, class).
type cell struct {
	hist     *hdr.PackedHistogram
	requests int64
	notFound int64
	errs     map[Kind]int64
}

type cellKey struct {
	op    Op
	class string
}

// worker owns its histograms; Run merges them after the worker is done. Only the interval
// fields are shared, with the interval collector, under mu.
type worker struct {
	id   int
	cfg  *Config
	rng  *rand.Rand
	zf   *rand.Zipf
	val  []byte
	key  []byte
	stmp []byte // stamp's buffer

	corr, uncorr, lag *hdr.PackedHistogram
	requests          int64 // answered, failures included
	ok                int64 // answered without error: what the histograms hold
	notFound          int64
	errs              map[Kind]int64
	cells             map[cellKey]*cell
	lastLag           time.Duration
	sent              int64

	// Hot-path shortcuts, fixed for the run. intervals: someone reads the interval
	// counters. closedLoop: uncorrected and send lag are derived from corr at the end.
	// oneCell: a single operation and no Classify, so the only cell's histogram is corr.
	intervals, closedLoop, oneCell bool

	mu         sync.Mutex
	ival       *hdr.PackedHistogram
	ivalReqs   int64
	ivalErrs   int64
	ivalLagMax time.Duration
}

func newWorker(id int, cfg *Config) *worker {
	w := &worker{
		id:     id,
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, uint64(id)+1)),
		corr:   newPacked(),
		uncorr: newPacked(),
		lag:    newPacked(),
		errs:   map[Kind]int64{},
		cells:  map[cellKey]*cell{},
		ival:   newPacked(),
		val:    make([]byte, cfg.ValueSize.Max),

		intervals:  cfg.OnInterval != nil || cfg.KeepIntervals,
		closedLoop: cfg.Rate <= 0,
		oneCell:    cfg.Classify == nil && cfg.Workload.ops() == 1,
	}
	for i := range w.val {
		w.val[i] = byte('a' + w.rng.IntN(26))
	}
	if cfg.KeyDist.Kind == DistZipf {
		w.zf = rand.NewZipf(w.rng, cfg.KeyDist.S, 1, uint64(cfg.Keys-1))
	}
	return w
}

// keyFor returns the key of request number i, valid until the next call.
func (w *worker) keyFor(i int64) []byte {
	var n int64
	switch w.cfg.KeyDist.Kind {
	case DistSequential:
		n = (w.cfg.KeyStart + i) % w.cfg.Keys
	case DistZipf:
		n = int64(w.zf.Uint64())
	default:
		n = w.rng.Int64N(w.cfg.Keys)
	}
	w.key = append(w.key[:0], w.cfg.KeyPrefix...)
	w.key = strconv.AppendInt(w.key, n, 10)
	return w.key
}

func (w *worker) value() []byte {
	n := w.cfg.ValueSize.Min
	if d := w.cfg.ValueSize.Max - n; d > 0 {
		n += w.rng.IntN(d + 1)
	}
	return w.val[:n]
}

// stamp makes val unique to request i, so a checker can tell every acknowledged write apart:
// it starts with "i:" (request numbers are unique in a run), padded with val's bytes to its
// length (a value shorter than the stamp is the stamp).
func (w *worker) stamp(val []byte, i int64) []byte {
	w.stmp = strconv.AppendInt(w.stmp[:0], i, 10)
	w.stmp = append(w.stmp, ':')
	if len(w.stmp) >= len(val) {
		return w.stmp
	}
	w.stmp = append(w.stmp, val[len(w.stmp):]...)
	return w.stmp
}

// pick chooses the operation, key and value of request i; key and value are valid until the
// next pick.
func (w *worker) pick(i int64) (op Op, key, val []byte) {
	op = w.cfg.Workload.pick(w.rng.IntN(w.cfg.Workload.total()))
	key = w.keyFor(i)
	if op == OpPut {
		val = w.value()
		if w.cfg.OnAck != nil {
			val = w.stamp(val, i)
		}
	}
	return op, key, val
}

// do sends request i and records it.
func (w *worker) do(ctx context.Context, t Target, i int64, intended time.Time, measureFrom time.Time) {
	op, kb, val := w.pick(i)
	key := string(kb)
	var kind Kind
	sent := time.Now()
	if dt, ok := t.(deadlineTarget); ok {
		kind = dt.request(ctx, w.id, op, key, val, sent.Add(w.cfg.Timeout))
	} else {
		rctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
		switch op {
		case OpGet:
			kind = t.Get(rctx, w.id, key)
		case OpPut:
			kind = t.Put(rctx, w.id, key, val)
		default:
			kind = t.Delete(rctx, w.id, key)
		}
		cancel()
	}
	done := time.Now()
	if w.cfg.OnAck != nil && kind == KindOK && op != OpGet {
		w.cfg.OnAck(op, key, val)
	}
	w.record(ctx, op, kb, kind, intended, sent, done, measureFrom)
}

// record counts one answered request: op on key, sent at sent (intended at intended; zero in
// the closed loop), answered at done.
func (w *worker) record(ctx context.Context, op Op, key []byte, kind Kind, intended, sent, done, measureFrom time.Time) {
	if kind == kindCanceled || (ctx.Err() != nil && kind != KindOK && kind != KindNotFound) {
		return // the run ended under the request
	}
	if intended.IsZero() {
		intended = sent
	}
	lag := sent.Sub(intended)
	w.lastLag = lag
	corrected := done.Sub(intended)

	// A failed request has no latency worth the name (a refused connection answers in
	// microseconds): it is counted by kind and kept out of every histogram, as wrk does.
	failed := kind.IsError()
	if failed && w.cfg.OnError != nil {
		w.cfg.OnError(op, key, kind)
	}
	if w.intervals {
		w.mu.Lock()
		if failed {
			w.ivalErrs++
		} else {
			record(w.ival, corrected)
		}
		w.ivalReqs++
		w.ivalLagMax = max(w.ivalLagMax, lag)
		w.mu.Unlock()
	}

	if intended.Before(measureFrom) {
		return // warmup
	}
	w.requests++
	if !failed {
		w.ok++
		record(w.corr, corrected)
		if !w.closedLoop {
			// Closed loop: uncorrected = corrected and lag = 0; Run fills them in at the end.
			record(w.uncorr, done.Sub(sent))
			record(w.lag, lag)
		}
	}
	var class string
	if w.cfg.Classify != nil {
		class = w.cfg.Classify(string(key))
	}
	c := w.cells[cellKey{op, class}]
	if c == nil {
		c = &cell{errs: map[Kind]int64{}}
		if !w.oneCell {
			c.hist = newPacked()
		}
		w.cells[cellKey{op, class}] = c
	}
	if c.hist != nil && !failed {
		record(c.hist, corrected)
	}
	c.requests++
	switch {
	case kind == KindNotFound:
		w.notFound++
		c.notFound++
	case kind.IsError():
		w.errs[kind]++
		c.errs[kind]++
	}
}

// open runs the open model: worker w sends requests w, w+C, w+2C, ... each at t0 + i/rate.
func (w *worker) open(ctx context.Context, t Target, t0, measureFrom, end time.Time) {
	cfg := w.cfg
	step := float64(time.Second) / cfg.Rate
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := int64(w.id); cfg.Requests == 0 || i < cfg.Requests; i += int64(cfg.Connections) {
		intended := t0.Add(time.Duration(float64(i) * step))
		if !intended.Before(end) {
			return
		}
		if d := time.Until(intended); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		if ctx.Err() != nil || !time.Now().Before(end) {
			return // a generator behind schedule stops at the end too; Run counts the unsent
		}
		w.sent++
		w.do(ctx, t, i, intended, measureFrom)
	}
}

// closed runs the closed loop: send, wait for the answer, send again.
func (w *worker) closed(ctx context.Context, t Target, next *atomic.Int64, measureFrom, end time.Time) {
	for ctx.Err() == nil && time.Now().Before(end) {
		i := next.Add(1) - 1
		if w.cfg.Requests > 0 && i >= w.cfg.Requests {
			return
		}
		w.do(ctx, t, i, time.Time{}, measureFrom)
	}
}

// collect takes the interval counters of every worker and resets them.
func collect(workers []*worker, into *hdr.Histogram) (reqs, errs int64, lag time.Duration) {
	into.Reset()
	for _, w := range workers {
		w.mu.Lock()
		w.ival.MergeInto(into)
		w.ival.Reset()
		reqs += w.ivalReqs
		errs += w.ivalErrs
		lag = max(lag, w.ivalLagMax)
		w.ivalReqs, w.ivalErrs, w.ivalLagMax = 0, 0, 0
		w.mu.Unlock()
	}
	return reqs, errs, lag
}

// Run drives t with the load cfg describes and returns what it measured. It blocks until the
// run ends: after Warmup+Duration, after cfg.Requests requests, or when ctx ends (then the
// result covers what ran and Result.Interrupted is set). The error is non-nil only for an
// invalid cfg.
func Run(ctx context.Context, cfg Config, t Target) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ru0 := rusageNow()
	workers := make([]*worker, cfg.Connections)
	for i := range workers {
		workers[i] = newWorker(i, &cfg)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	t0 := time.Now()
	measureFrom := t0.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	var wg sync.WaitGroup
	var next atomic.Int64
	if lt, ok := t.(loopTarget); ok && cfg.Rate <= 0 && cfg.OnAck == nil {
		// The closed loop on the target's event loops (HTTP on Linux), or, where it has none,
		// on a goroutine per worker.
		wg.Go(func() {
			if !lt.runClosedLoops(runCtx, workers, &next, measureFrom, end) {
				var ws sync.WaitGroup
				for _, w := range workers {
					ws.Go(func() { w.closed(runCtx, t, &next, measureFrom, end) })
				}
				ws.Wait()
			}
		})
	} else {
		for _, w := range workers {
			wg.Go(func() {
				if cfg.Rate > 0 {
					w.open(runCtx, t, t0, measureFrom, end)
				} else {
					w.closed(runCtx, t, &next, measureFrom, end)
				}
			})
		}
	}

	// The interval collector: owned by Run, stopped before Run returns.
	var intervals []Interval
	done := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		if cfg.OnInterval == nil && !cfg.KeepIntervals {
			<-done
			return
		}
		h := NewHistogram()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last := t0
		emit := func(now time.Time) {
			reqs, errs, lag := collect(workers, h)
			iv := Interval{
				Start: last.Sub(t0), End: now.Sub(t0), Warmup: last.Add(now.Sub(last) / 2).Before(measureFrom),
				Requests: reqs, Errors: errs, SendLag: lag,
				P50: time.Duration(h.ValueAtPercentile(50)), P99: time.Duration(h.ValueAtPercentile(99)),
				Max: time.Duration(h.Max()),
			}
			if d := now.Sub(last).Seconds(); d > 0 {
				iv.Rate = float64(reqs) / d
			}
			if cfg.OnInterval != nil {
				cfg.OnInterval(iv)
			}
			if cfg.KeepIntervals && !iv.Warmup && iv.Requests > 0 {
				// A second whose every request failed is kept (its errors count in its
				// phase), without a histogram.
				if h.TotalCount() > 0 {
					p := newPacked()
					p.MergeFrom(h)
					p.SetStartTimeMs(last.UnixMilli())
					p.SetEndTimeMs(now.UnixMilli())
					iv.Hist = p
				}
				intervals = append(intervals, iv)
			}
			last = now
		}
		for {
			select {
			case now := <-tick.C:
				emit(now)
			case <-done:
				if now := time.Now(); now.Sub(last) > 10*time.Millisecond {
					emit(now)
				}
				return
			}
		}
	}()
	wg.Wait()
	finish := time.Now()
	close(done)
	<-collected
	ru1 := rusageNow()

	res := &Result{
		Config:      cfg,
		Start:       t0,
		Elapsed:     finish.Sub(measureFrom),
		Corrected:   NewHistogram(),
		Uncorrected: NewHistogram(),
		SendLag:     NewHistogram(),
		Errors:      map[Kind]int64{},
		Intervals:   intervals,
		Interrupted: ctx.Err() != nil,
	}
	if res.Elapsed <= 0 {
		res.Elapsed = finish.Sub(t0)
	}
	res.CPU = cpuUse(ru0, ru1, finish.Sub(t0))
	cells := map[cellKey]*Breakdown{}
	var lastLags []time.Duration
	for _, w := range workers {
		w.corr.MergeInto(res.Corrected)
		if w.closedLoop {
			w.corr.MergeInto(res.Uncorrected)
			if w.ok > 0 {
				_ = res.SendLag.RecordValues(0, w.ok) // 0 is within the trackable range
			}
		} else {
			w.uncorr.MergeInto(res.Uncorrected)
			w.lag.MergeInto(res.SendLag)
		}
		res.Requests += w.requests
		res.NotFound += w.notFound
		for k, n := range w.errs {
			res.Errors[k] += n
		}
		for k, c := range w.cells {
			b := cells[k]
			if b == nil {
				b = &Breakdown{Op: k.op.String(), Class: k.class, Latency: NewHistogram(), Errors: map[Kind]int64{}}
				cells[k] = b
			}
			if c.hist != nil {
				c.hist.MergeInto(b.Latency)
			} else {
				w.corr.MergeInto(b.Latency) // oneCell: c is the worker's only cell
			}
			b.Requests += c.requests
			b.NotFound += c.notFound
			for kind, n := range c.errs {
				b.Errors[kind] += n
			}
		}
		lastLags = append(lastLags, w.lastLag)
	}
	for _, b := range cells {
		res.Breakdown = append(res.Breakdown, *b)
	}
	slices.SortFunc(res.Breakdown, func(a, b Breakdown) int {
		if a.Class != b.Class {
			if a.Class < b.Class {
				return -1
			}
			return 1
		}
		if a.Op < b.Op {
			return -1
		} else if a.Op > b.Op {
			return 1
		}
		return 0
	})
	res.Achieved = float64(res.Requests) / res.Elapsed.Seconds()
	if cfg.Rate > 0 {
		scheduled := int64(math.Ceil(end.Sub(t0).Seconds() * cfg.Rate))
		if cfg.Requests > 0 {
			scheduled = min(scheduled, cfg.Requests)
		}
		var sent int64
		for _, w := range workers {
			sent += w.sent
		}
		if !res.Interrupted {
			res.Unsent = max(scheduled-sent, 0)
		}
		slices.Sort(lastLags)
		res.FinalLag = lastLags[len(lastLags)/2]
		if res.FinalLag > cfg.MaxLag {
			res.Invalid = true
			res.InvalidReason = "the generator fell " + res.FinalLag.Round(time.Millisecond).String() +
				" behind its schedule (max " + cfg.MaxLag.String() + ") and left " + strconv.FormatInt(res.Unsent, 10) +
				" requests unsent: the asked rate was not offered; " +
				"the target is too slow for --connections " + strconv.Itoa(cfg.Connections) +
				" (raise it) or the generator is saturated (its CPU: " + res.CPU.String() + ")"
		}
	}
	if !res.Invalid {
		res.Invalid, res.InvalidReason = res.tooManyErrors()
	}
	return res, nil
}
