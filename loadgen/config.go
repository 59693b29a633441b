package loadgen

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Config describes one load run. Build it with DefaultConfig, adjust, then call Validate (Run
// validates too).
type Config struct {
	// Rate is the asked request rate over all connections, in requests per second. Request i is
	// intended at start + i/Rate whatever happened to earlier requests (the open model; latency is
	// measured from that intended time). 0 = closed loop: each connection sends back to back.
	Rate float64
	// Duration is the measured part of the run, after Warmup.
	Duration time.Duration
	// Warmup runs the same load first and leaves it out of every result.
	Warmup time.Duration
	// Connections is the number of workers; each keeps at most one request in flight on its own
	// connection (the Target maps worker i to a connection).
	Connections int
	// Workload is the mix of operations.
	Workload Mix
	// Keys is the size of the keyspace: keys are KeyPrefix + a number in [0, Keys).
	Keys int64
	// KeyDist chooses the key of each request.
	KeyDist KeyDist
	// KeyStart offsets a sequential run: request i uses key (KeyStart+i) mod Keys, so a run of
	// Keys-KeyStart requests writes keys KeyStart..Keys-1 (a fill split into key ranges).
	KeyStart int64
	// KeyPrefix starts every key.
	KeyPrefix string
	// ValueSize is the size of the values of PUTs, uniform in [Min, Max].
	ValueSize Size
	// Timeout bounds each request.
	Timeout time.Duration
	// Requests stops the run after this many requests in all (0 = run for Warmup+Duration).
	// With Requests set, Duration only bounds the run.
	Requests int64
	// MaxErrors marks the result invalid when more than this fraction of the measured
	// requests failed (0.01 = 1%): latencies of the rest do not describe the cluster asked for.
	MaxErrors float64
	// MaxLag marks the result invalid when the generator ends the run this far behind its own
	// schedule (the median over connections of the send lag of their last request).
	MaxLag time.Duration
	// Seed makes key and value choices reproducible.
	Seed uint64
	// Spin, in a closed loop over HTTP (on Linux), busy-polls up to this long for answers
	// before the event loop sleeps. On a VM a generator asleep when an answer arrives costs
	// the server a cross-CPU wake-up per answer (measured: about 20% of a one-core node's
	// closed-loop throughput, docs/bench.md); spinning measures the server without it, at the
	// price of a whole generator core. 0 = sleep at once, as wrk does.
	Spin time.Duration

	// Classify, when set, names the class of a key (kvctl: the key's primary node); results
	// are broken down per operation and per class. Called concurrently from every worker.
	Classify func(key string) string
	// OnInterval, when set, receives a summary of every second of the run (warmup included),
	// from one goroutine, in order. It must return quickly.
	OnInterval func(Interval)
	// OnAck, when set, is called with every acknowledged PUT and DELETE (value nil) of the
	// run, warmup included, from the worker that sent it, before the next request of that
	// worker; value is valid only during the call. With OnAck set, every PUT's value starts
	// with the request's number ("i:"), so no two acknowledged writes carry the same value,
	// and the closed loop runs a goroutine per worker (the event loops do not keep values).
	// Called concurrently from every worker; it must return quickly.
	OnAck func(op Op, key string, value []byte)
	// OnError, when set, is called with every request that failed (an error Kind; not one the
	// run's end cut short), warmup included, from the worker or event loop that sent it; key
	// is valid only during the call. Called concurrently; it must return quickly.
	OnError func(op Op, key []byte, kind Kind)
	// KeepIntervals keeps one latency histogram per measured second in Result.Intervals (for
	// an HdrHistogram interval log).
	KeepIntervals bool
}

// DefaultConfig returns a 10-second run of GETs at 1000 req/s on 16 connections.
func DefaultConfig() Config {
	return Config{
		Rate:        1000,
		Duration:    10 * time.Second,
		Warmup:      2 * time.Second,
		Connections: 16,
		Workload:    Mix{Get: 1},
		Keys:        100_000,
		KeyDist:     KeyDist{Kind: DistUniform},
		KeyPrefix:   "bench:",
		ValueSize:   Size{Min: 100, Max: 100},
		Timeout:     2 * time.Second,
		MaxLag:      250 * time.Millisecond,
		MaxErrors:   0.01,
	}
}

// Validate reports the first problem of c.
func (c Config) Validate() error {
	switch {
	case c.Rate < 0:
		return fmt.Errorf("%w: rate %g: want >= 0", ErrInvalidConfig, c.Rate)
	case c.Duration <= 0:
		return fmt.Errorf("%w: duration %s: want > 0", ErrInvalidConfig, c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("%w: warmup %s: want >= 0", ErrInvalidConfig, c.Warmup)
	case c.Connections < 1:
		return fmt.Errorf("%w: connections %d: want >= 1", ErrInvalidConfig, c.Connections)
	case c.Workload.total() <= 0:
		return fmt.Errorf("%w: workload: no operation has a weight", ErrInvalidConfig)
	case c.Keys < 1:
		return fmt.Errorf("%w: keys %d: want >= 1", ErrInvalidConfig, c.Keys)
	case c.KeyStart < 0 || c.KeyStart >= c.Keys:
		return fmt.Errorf("%w: key start %d: want 0 <= start < keys (%d)", ErrInvalidConfig, c.KeyStart, c.Keys)
	case c.ValueSize.Min < 0 || c.ValueSize.Max < c.ValueSize.Min:
		return fmt.Errorf("%w: value size %s: want 0 <= min <= max", ErrInvalidConfig, c.ValueSize)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: timeout %s: want > 0", ErrInvalidConfig, c.Timeout)
	case c.Requests < 0:
		return fmt.Errorf("%w: requests %d: want >= 0", ErrInvalidConfig, c.Requests)
	case c.MaxLag <= 0:
		return fmt.Errorf("%w: max lag %s: want > 0", ErrInvalidConfig, c.MaxLag)
	case c.MaxErrors < 0 || c.MaxErrors > 1 || c.MaxErrors != c.MaxErrors:
		return fmt.Errorf("%w: max errors %g: want a fraction in [0, 1]", ErrInvalidConfig, c.MaxErrors)
	case c.Spin < 0:
		return fmt.Errorf("%w: spin %s: want >= 0", ErrInvalidConfig, c.Spin)
	}
	return c.KeyDist.validate()
}

// Op is one kind of request.
type Op int

// The operations a workload mixes.
const (
	OpGet Op = iota
	OpPut
	OpDelete
	numOps
)

func (o Op) String() string {
	switch o {
	case OpGet:
		return "get"
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Mix weighs the operations of a workload; weights are relative (90/10 = 9/1).
type Mix struct{ Get, Put, Delete int }

func (m Mix) total() int { return m.Get + m.Put + m.Delete }

// ops counts the operations with a weight.
func (m Mix) ops() int {
	n := 0
	for _, v := range []int{m.Get, m.Put, m.Delete} {
		if v > 0 {
			n++
		}
	}
	return n
}

// pick maps n in [0, total) to an operation.
func (m Mix) pick(n int) Op {
	switch {
	case n < m.Get:
		return OpGet
	case n < m.Get+m.Put:
		return OpPut
	}
	return OpDelete
}

// String returns the workload in ParseWorkload's syntax.
func (m Mix) String() string {
	switch {
	case m.Put == 0 && m.Delete == 0:
		return "get"
	case m.Get == 0 && m.Delete == 0:
		return "put"
	case m.Get == 0 && m.Put == 0:
		return "delete"
	}
	var parts []string
	for _, p := range []struct {
		name string
		w    int
	}{{"get", m.Get}, {"put", m.Put}, {"delete", m.Delete}} {
		if p.w > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", p.name, p.w))
		}
	}
	return "mixed:" + strings.Join(parts, ",")
}

// ParseWorkload parses "get", "put", "delete" or "mixed:get=90,put=10[,delete=N]".
func ParseWorkload(s string) (Mix, error) {
	switch s {
	case "get":
		return Mix{Get: 1}, nil
	case "put":
		return Mix{Put: 1}, nil
	case "delete", "del":
		return Mix{Delete: 1}, nil
	}
	spec, ok := strings.CutPrefix(s, "mixed:")
	if !ok {
		return Mix{}, fmt.Errorf("%w: workload %q: want get, put, delete or mixed:get=90,put=10", ErrInvalidConfig, s)
	}
	var m Mix
	for part := range strings.SplitSeq(spec, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		w, err := strconv.Atoi(val)
		if !ok || err != nil || w < 0 {
			return Mix{}, fmt.Errorf("%w: workload %q: part %q: want op=weight", ErrInvalidConfig, s, part)
		}
		switch name {
		case "get":
			m.Get = w
		case "put":
			m.Put = w
		case "delete", "del":
			m.Delete = w
		default:
			return Mix{}, fmt.Errorf("%w: workload %q: unknown op %q", ErrInvalidConfig, s, name)
		}
	}
	if m.total() <= 0 {
		return Mix{}, fmt.Errorf("%w: workload %q: all weights are zero", ErrInvalidConfig, s)
	}
	return m, nil
}

// Key distributions.
const (
	DistUniform    = "uniform"
	DistZipf       = "zipf"
	DistSequential = "sequential"
)

// KeyDist chooses keys: uniform, zipf with exponent S (> 1; rank 0 the hottest), or sequential
// (request i uses key i mod Keys, so a run of Keys requests touches every key once).
type KeyDist struct {
	Kind string
	S    float64
}

// ParseKeyDist parses "uniform", "sequential" or "zipf:S" (S > 1, e.g. zipf:1.1).
func ParseKeyDist(s string) (KeyDist, error) {
	switch s {
	case DistUniform, DistSequential:
		return KeyDist{Kind: s}, nil
	}
	v, ok := strings.CutPrefix(s, "zipf:")
	if !ok {
		return KeyDist{}, fmt.Errorf("%w: key distribution %q: want uniform, sequential or zipf:S", ErrInvalidConfig, s)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return KeyDist{}, fmt.Errorf("%w: key distribution %q: exponent: %w", ErrInvalidConfig, s, err)
	}
	d := KeyDist{Kind: DistZipf, S: f}
	return d, d.validate()
}

func (d KeyDist) validate() error {
	switch d.Kind {
	case DistUniform, DistSequential:
		return nil
	case DistZipf:
		if !(d.S > 1) {
			return fmt.Errorf("%w: zipf exponent %g: want > 1", ErrInvalidConfig, d.S)
		}
		return nil
	}
	return fmt.Errorf("%w: key distribution %q: want uniform, sequential or zipf:S", ErrInvalidConfig, d.Kind)
}

// String returns the distribution in ParseKeyDist's syntax.
func (d KeyDist) String() string {
	if d.Kind == DistZipf {
		return "zipf:" + strconv.FormatFloat(d.S, 'g', -1, 64)
	}
	return d.Kind
}

// Size is a value size in bytes, uniform in [Min, Max].
type Size struct{ Min, Max int }

// ParseSize parses "100" or "100-1000" (bytes).
func ParseSize(s string) (Size, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	min, err := strconv.Atoi(strings.TrimSpace(lo))
	if err != nil {
		return Size{}, fmt.Errorf("%w: value size %q: want N or MIN-MAX bytes", ErrInvalidConfig, s)
	}
	max := min
	if isRange {
		if max, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil {
			return Size{}, fmt.Errorf("%w: value size %q: want N or MIN-MAX bytes", ErrInvalidConfig, s)
		}
	}
	if min < 0 || max < min {
		return Size{}, fmt.Errorf("%w: value size %q: want 0 <= min <= max", ErrInvalidConfig, s)
	}
	return Size{Min: min, Max: max}, nil
}

func (s Size) String() string {
	if s.Min == s.Max {
		return strconv.Itoa(s.Min)
	}
	return fmt.Sprintf("%d-%d", s.Min, s.Max)
}

// Objective is one latency bound of an SLO: the Percentile (0–100; 100 = max) of the
// corrected latency must stay at or under Max.
type Objective struct {
	Percentile float64
	Max        time.Duration
}

// SLO is a set of objectives that all must hold.
type SLO []Objective

// ParseSLO parses "p99=10ms", "p50=2ms,p999=50ms,max=200ms" (p999 = 99.9, p9999 = 99.99).
func ParseSLO(s string) (SLO, error) {
	var slo SLO
	for part := range strings.SplitSeq(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%w: slo %q: part %q: want pNN=DURATION", ErrInvalidConfig, s, part)
		}
		d, err := time.ParseDuration(val)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: slo %q: bound %q: want a positive duration like 10ms", ErrInvalidConfig, s, val)
		}
		p, err := parsePercentileName(name)
		if err != nil {
			return nil, fmt.Errorf("%w: slo %q: %w", ErrInvalidConfig, s, err)
		}
		slo = append(slo, Objective{Percentile: p, Max: d})
	}
	return slo, nil
}

// parsePercentileName maps p50 -> 50, p99 -> 99, p999 -> 99.9, p99.9 -> 99.9, max -> 100.
func parsePercentileName(name string) (float64, error) {
	if name == "max" {
		return 100, nil
	}
	digits, ok := strings.CutPrefix(name, "p")
	if !ok || digits == "" {
		return 0, fmt.Errorf("percentile %q: want p50, p99, p999 or max", name)
	}
	if !strings.Contains(digits, ".") && len(digits) > 2 {
		digits = digits[:2] + "." + digits[2:]
	}
	p, err := strconv.ParseFloat(digits, 64)
	if err != nil || p <= 0 || p > 100 {
		return 0, fmt.Errorf("percentile %q: want p50, p99, p999 or max", name)
	}
	return p, nil
}

func (o Objective) String() string {
	return percentileName(o.Percentile) + "=" + o.Max.String()
}

func (s SLO) String() string {
	parts := make([]string, len(s))
	for i, o := range s {
		parts[i] = o.String()
	}
	return strings.Join(parts, ",")
}

func percentileName(p float64) string {
	if p >= 100 {
		return "max"
	}
	return "p" + strings.ReplaceAll(strconv.FormatFloat(p, 'f', -1, 64), ".", "")
}
