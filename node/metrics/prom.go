package metrics

import (
	"regexp"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"ringkv/node/replica"
)

// Label sets stay bounded: op (3) x role (2) x kind (6), peer (cluster size). Per-vnode series
// exist only with Config.VnodeMetrics; by default the vnode load is one summary family.
var (
	descOps = prometheus.NewDesc("ringkv_ops_total",
		"Operations handled, by operation and role (coordinator: client requests; replica: requests from coordinators).",
		[]string{"op", "role"}, nil)
	descOpErrors = prometheus.NewDesc("ringkv_op_errors_total",
		"Operations that failed, by operation, role and error kind.",
		[]string{"op", "role", "kind"}, nil)
	descOpDuration = prometheus.NewDesc("ringkv_op_duration_seconds",
		"Operation latency; quantiles over the last latency window (HDR histogram).",
		[]string{"op", "role"}, nil)
	descReconciled = prometheus.NewDesc("ringkv_read_reconciliations_total",
		"Replicas a read brought up to date with the newest version it saw (read reconciliation).", nil, nil)
	descHints = prometheus.NewDesc("ringkv_hints_total",
		"Hints stored for unreachable replicas.", nil, nil)
	descHintsQueued = prometheus.NewDesc("ringkv_hints_queued",
		"Hints held on disk for a peer that missed writes.", []string{"peer"}, nil)
	descHintsQueuedBytes = prometheus.NewDesc("ringkv_hints_queued_bytes",
		"Bytes of the hints held for a peer.", []string{"peer"}, nil)
	descHintsDelivered = prometheus.NewDesc("ringkv_hints_delivered_total",
		"Hints handed over to a peer (or to the key's current replicas) since start.", []string{"peer"}, nil)
	descHintsDropped = prometheus.NewDesc("ringkv_hints_dropped_total",
		"Hints dropped since start: older than --max-hint-window, over --max-hint-bytes, or not stored on a full disk (repair covers them).",
		[]string{"peer"}, nil)
	descBreaker = prometheus.NewDesc("ringkv_breaker_state",
		"Circuit breaker state per peer: 1 for the current state (closed, open), 0 for the others.",
		[]string{"peer", "state"}, nil)
	descBreakerFailures = prometheus.NewDesc("ringkv_breaker_consecutive_failures",
		"Consecutive failed calls to a peer.", []string{"peer"}, nil)
	descKeys = prometheus.NewDesc("ringkv_store_keys",
		"Records in the store, tombstones included (refreshed periodically).", nil, nil)
	descDisk = prometheus.NewDesc("ringkv_store_disk_bytes",
		"Bytes badger uses on disk, by part (lsm, vlog).", []string{"part"}, nil)
	descClockRejected = prometheus.NewDesc("ringkv_clock_offset_rejected_total",
		"Records refused for a timestamp further ahead of this node's clock than --max-clock-offset.", nil, nil)
	descBatchMessages = prometheus.NewDesc("ringkv_replica_batch_messages_total",
		"Batch messages this node sent to its peers' Replica service.", nil, nil)
	descBatchItems = prometheus.NewDesc("ringkv_replica_batch_items_total",
		"Reads and writes this node sent to its peers in batch messages (items per message: this over ringkv_replica_batch_messages_total).", nil, nil)
	descClockOffset = prometheus.NewDesc("ringkv_clock_offset_seconds",
		"This node's clock offset to a peer (the peer's clock minus this one's), measured on replica calls.", []string{"peer"}, nil)
	descEpoch = prometheus.NewDesc("ringkv_ring_epoch",
		"Epoch of the ring this node routes by.", nil, nil)
	descVnodeLoad = prometheus.NewDesc("ringkv_vnode_load_ops_per_second",
		"Distribution of the 1-minute read+write rate over the vnodes this node replicates (count: vnodes; sum: total rate).",
		nil, nil)
	descVnodeKeysDist = prometheus.NewDesc("ringkv_vnode_load_keys",
		"Distribution of the key count over the vnodes this node replicates (count: vnodes; sum: keys).",
		nil, nil)
	descVnodeReads = prometheus.NewDesc("ringkv_vnode_reads_total",
		"Reads served per vnode (only with per-vnode metrics on).", []string{"vnode"}, nil)
	descVnodeWrites = prometheus.NewDesc("ringkv_vnode_writes_total",
		"Writes served per vnode (only with per-vnode metrics on).", []string{"vnode"}, nil)
	descVnodeKeys = prometheus.NewDesc("ringkv_vnode_keys",
		"Records per vnode (only with per-vnode metrics on).", []string{"vnode"}, nil)
	descVnodeBytes = prometheus.NewDesc("ringkv_vnode_bytes",
		"Bytes per vnode (only with per-vnode metrics on).", []string{"vnode"}, nil)
)

var breakerStates = [...]replica.BreakerState{replica.BreakerClosed, replica.BreakerOpen}

// collector exports a node's numbers: the same ones Stats.Snapshot returns.
type collector struct{ s *Stats }

func newPromRegistry(s *Stats) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{s},
		// goroutines created: what the write path's goroutine per call or item cost shows as.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/goroutines-created:goroutines$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOps, descOpErrors, descOpDuration, descReconciled, descHints,
		descHintsQueued, descHintsQueuedBytes, descHintsDelivered, descHintsDropped,
		descBreaker, descBreakerFailures, descKeys, descDisk, descEpoch, descVnodeLoad, descVnodeKeysDist,
		descClockRejected, descClockOffset, descBatchMessages, descBatchItems} {
		ch <- d
	}
	if c.s.reg.cfg.VnodeMetrics {
		for _, d := range []*prometheus.Desc{descVnodeReads, descVnodeWrites, descVnodeKeys, descVnodeBytes} {
			ch <- d
		}
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	r := c.s.reg
	ns := c.s.Snapshot(true)
	for i, os := range ns.Ops {
		s := &r.slots[i]
		op, role := replica.Op(i/numRoles).String(), replica.Role(i%numRoles).String()
		ch <- prometheus.MustNewConstMetric(descOps, prometheus.CounterValue, float64(os.Count), op, role)
		for k, kind := range ErrorKinds {
			ch <- prometheus.MustNewConstMetric(descOpErrors, prometheus.CounterValue,
				float64(s.kinds[k].Load()), op, role, kind)
		}
		ch <- prometheus.MustNewConstSummary(descOpDuration, os.Count, float64(s.sumNanos.Load())/1e9,
			map[float64]float64{0.5: os.P50Ms / 1000, 0.99: os.P99Ms / 1000, 0.999: os.P999Ms / 1000},
			op, role)
	}
	ch <- prometheus.MustNewConstMetric(descReconciled, prometheus.CounterValue, float64(ns.ReadReconciliations))
	ch <- prometheus.MustNewConstMetric(descHints, prometheus.CounterValue, float64(ns.Hints))
	if r.cfg.Hints != nil {
		for _, q := range r.cfg.Hints() {
			ch <- prometheus.MustNewConstMetric(descHintsQueued, prometheus.GaugeValue, float64(q.Count), q.Peer)
			ch <- prometheus.MustNewConstMetric(descHintsQueuedBytes, prometheus.GaugeValue, float64(q.Bytes), q.Peer)
			ch <- prometheus.MustNewConstMetric(descHintsDelivered, prometheus.CounterValue, float64(q.Delivered), q.Peer)
			ch <- prometheus.MustNewConstMetric(descHintsDropped, prometheus.CounterValue, float64(q.Dropped), q.Peer)
		}
	}
	for _, b := range ns.Breakers {
		for _, st := range breakerStates {
			v := 0.0
			if b.State == st.Proto() {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descBreaker, prometheus.GaugeValue, v, b.Peer, string(st))
		}
		ch <- prometheus.MustNewConstMetric(descBreakerFailures, prometheus.GaugeValue, float64(b.ConsecutiveFailures), b.Peer)
	}
	ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(ns.Keys))
	if r.cfg.Store != nil {
		lsm, vlog := r.cfg.Store.Size()
		ch <- prometheus.MustNewConstMetric(descDisk, prometheus.GaugeValue, float64(lsm), "lsm")
		ch <- prometheus.MustNewConstMetric(descDisk, prometheus.GaugeValue, float64(vlog), "vlog")
	}
	ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, float64(ns.Epoch))
	if f := r.cfg.Batches; f != nil {
		msgs, items := f()
		ch <- prometheus.MustNewConstMetric(descBatchMessages, prometheus.CounterValue, float64(msgs))
		ch <- prometheus.MustNewConstMetric(descBatchItems, prometheus.CounterValue, float64(items))
	}
	if f := r.cfg.ClockRejected; f != nil {
		ch <- prometheus.MustNewConstMetric(descClockRejected, prometheus.CounterValue, float64(f()))
	}
	if f := r.cfg.ClockOffsets; f != nil {
		for peer, d := range f() {
			ch <- prometheus.MustNewConstMetric(descClockOffset, prometheus.GaugeValue, d.Seconds(), peer)
		}
	}

	var load, keys []float64
	var loadSum, keySum float64
	for _, v := range ns.Vnodes {
		l := v.Reads_1M + v.Writes_1M
		load, keys = append(load, l), append(keys, float64(v.Keys))
		loadSum += l
		keySum += float64(v.Keys)
		if r.cfg.VnodeMetrics {
			id := strconv.FormatUint(v.Token, 10)
			ch <- prometheus.MustNewConstMetric(descVnodeReads, prometheus.CounterValue, float64(v.ReadsTotal), id)
			ch <- prometheus.MustNewConstMetric(descVnodeWrites, prometheus.CounterValue, float64(v.WritesTotal), id)
			ch <- prometheus.MustNewConstMetric(descVnodeKeys, prometheus.GaugeValue, float64(v.Keys), id)
			ch <- prometheus.MustNewConstMetric(descVnodeBytes, prometheus.GaugeValue, float64(v.Bytes), id)
		}
	}
	ch <- prometheus.MustNewConstSummary(descVnodeLoad, uint64(len(load)), loadSum, spread(load))
	ch <- prometheus.MustNewConstSummary(descVnodeKeysDist, uint64(len(keys)), keySum, spread(keys))
}

// spread returns the 0.5, 0.9, 0.99 and 1 quantiles of xs (sorted in place).
func spread(xs []float64) map[float64]float64 {
	q := map[float64]float64{0.5: 0, 0.9: 0, 0.99: 0, 1: 0}
	if len(xs) == 0 {
		return q
	}
	slices.Sort(xs)
	for p := range q {
		i := int(p*float64(len(xs)-1) + 0.5)
		q[p] = xs[min(i, len(xs)-1)]
	}
	return q
}
