package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The node's state that the alert rules of deploy/monitoring/ read, beside the request
// metrics of node/metrics: disk against its reserve, the clock bound, reachable quorums,
// damaged ranges, repair's age, the ring change in flight and raft's term. Every family has
// no label beyond the target's own, so none grows with the data or the cluster.
var (
	descDiskFree = prometheus.NewDesc("ringkv_disk_free_bytes",
		"Free bytes on the data volume, as the store last measured them (absent in memory).", nil, nil)
	descDiskReserve = prometheus.NewDesc("ringkv_disk_reserve_bytes",
		"The free-space reserve in bytes (--min-free-disk on this volume): below it writes answer 507.", nil, nil)
	descClockBound = prometheus.NewDesc("ringkv_clock_max_offset_seconds",
		"The clock offset bound (--max-clock-offset): timestamps further ahead are refused.", nil, nil)
	descRanges = prometheus.NewDesc("ringkv_ranges",
		"Token ranges of the current ring.", nil, nil)
	descRangesNoQuorum = prometheus.NewDesc("ringkv_ranges_without_quorum",
		"Token ranges for which this node cannot reach a quorum (N/2+1) of the replicas, itself included.", nil, nil)
	descDamagedRanges = prometheus.NewDesc("ringkv_damaged_ranges",
		"Ranges this node replicates that hold damaged data awaiting repair from the other replicas.", nil, nil)
	descRepairLast = prometheus.NewDesc("ringkv_repair_last_completed_timestamp_seconds",
		"Unix time by which a repair had completed on every range this node is the primary of (0: never).", nil, nil)
	descRepairInterval = prometheus.NewDesc("ringkv_repair_interval_seconds",
		"How often the node repairs its primary ranges (--repair-interval; 0: no background repair).", nil, nil)
	descRepairWalks = prometheus.NewDesc("ringkv_repair_tree_walks_total",
		"Merkle tree walks of a token range this node completed for repair sessions since it started.", nil, nil)
	descRepairPaused = prometheus.NewDesc("ringkv_repair_paused",
		"1 while repair is paused cluster-wide (kvctl repair pause), else 0.", nil, nil)
	descChangeInFlight = prometheus.NewDesc("ringkv_ring_change_in_flight",
		"1 while a ring change (add, remove, rebalance) is in flight, else 0.", nil, nil)
	descChangeStarted = prometheus.NewDesc("ringkv_ring_change_started_timestamp_seconds",
		"Unix time the ring change in flight started (0: none in flight).", nil, nil)
	descChangePending = prometheus.NewDesc("ringkv_ring_change_moves_pending",
		"Range moves of the change in flight not done yet (0: none in flight).", nil, nil)
	descChangeStalled = prometheus.NewDesc("ringkv_ring_change_moves_stalled",
		"Range moves this node receives that made no progress for --move-stall-after (kvctl ring status says why).", nil, nil)
	descRaftTerm = prometheus.NewDesc("ringkv_raft_term",
		"This node's raft term in the metadata group: it grows by one at every election.", nil, nil)
	descRaftLeader = prometheus.NewDesc("ringkv_raft_has_leader",
		"1 when this node knows a raft leader of the metadata group, else 0.", nil, nil)
)

// gauges is the node as a prometheus.Collector of the families above. Collect reads the
// node's parts (each safe for concurrent use) at scrape time.
type gauges struct{ n *Node }

var _ prometheus.Collector = gauges{}

func (g gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDiskFree, descDiskReserve, descClockBound, descRanges, descRangesNoQuorum,
		descDamagedRanges, descRepairLast, descRepairInterval, descRepairWalks, descRepairPaused, descChangeInFlight, descChangeStarted,
		descChangePending, descChangeStalled, descRaftTerm, descRaftLeader} {
		ch <- d
	}
}

func (g gauges) Collect(ch chan<- prometheus.Metric) {
	n := g.n
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	if !n.cfg.InMemory {
		_, _, reserve := n.st.Disk()
		gauge(descDiskFree, float64(n.freeDisk()))
		gauge(descDiskReserve, float64(reserve))
	}
	gauge(descClockBound, n.cfg.MaxClockOffset.Seconds())
	lost, total := n.coord.QuorumLoss()
	gauge(descRanges, float64(total))
	gauge(descRangesNoQuorum, float64(lost))
	gauge(descDamagedRanges, float64(n.repairs.DamagedRanges(n.st)))
	gauge(descRepairLast, unixSeconds(n.repairR.LastRepaired(n.primaryRanges())))
	gauge(descRepairInterval, n.cfg.RepairInterval.Seconds())
	ch <- prometheus.MustNewConstMetric(descRepairWalks, prometheus.CounterValue, float64(n.repairR.Walks()))
	paused := 0.0
	if n.cl.Repairs().Paused != nil {
		paused = 1
	}
	gauge(descRepairPaused, paused)
	inFlight, started, pending := 0.0, 0.0, 0.0
	if c := n.cl.Change(); c != nil {
		inFlight, started, pending = 1, float64(c.StartedUnix), float64(c.Pending())
	}
	gauge(descChangeInFlight, inFlight)
	gauge(descChangeStarted, started)
	gauge(descChangePending, pending)
	gauge(descChangeStalled, float64(len(n.stalledMoves())))
	gauge(descRaftTerm, float64(n.cl.Term()))
	leader := 0.0
	if id, _ := n.cl.Leader(); id != "" {
		leader = 1
	}
	gauge(descRaftLeader, leader)
}

// unixSeconds is t in Unix seconds, 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
