package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"ringkv/node/hints"
	"ringkv/node/replica"
	"ringkv/node/ring"
)

func TestPrometheusLint(t *testing.T) {
	rg := testRing(t, 3, 2, 8, "n1", "n2")
	for _, vnodeMetrics := range []bool{false, true} {
		reg := New(Config{
			ID: "n1", Ring: func() *ring.Ring { return rg }, Store: openStore(t), VnodeMetrics: vnodeMetrics,
			Hints: func() []hints.Queue {
				return []hints.Queue{{Peer: "n2", Count: 3, Bytes: 120, Queued: 5, Delivered: 1, Dropped: 1}, {Peer: "n3", Delivered: 2}}
			},
		})
		reg.ObserveOp(replica.OpPut, replica.RoleCoordinator, time.Millisecond, errors.New("boom"))
		reg.ObserveVnode(42, true, 10)
		stats := NewStats(reg, func() []replica.Breaker {
			return []replica.Breaker{{Peer: "n2", State: replica.BreakerOpen, ConsecutiveFailures: 5}}
		})
		mfs := gather(t, collector{stats})
		problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
		if err != nil {
			t.Fatalf("lint: %v", err)
		}
		for _, p := range problems {
			t.Errorf("vnode metrics %v: lint %s: %s", vnodeMetrics, p.Metric, p.Text)
		}
		perVnode := series(mfs, "ringkv_vnode_reads_total")
		if want := map[bool]int{false: 0, true: 16}[vnodeMetrics]; perVnode != want {
			t.Errorf("vnode metrics %v: got %d per-vnode read series, want %d", vnodeMetrics, perVnode, want)
		}
		for _, name := range []string{"ringkv_hints_queued", "ringkv_hints_queued_bytes", "ringkv_hints_delivered_total", "ringkv_hints_dropped_total"} {
			if got := series(mfs, name); got != 2 {
				t.Errorf("got %d %s series, want 2 (one per peer)", got, name)
			}
		}
		if got := value(mfs, "ringkv_hints_queued", "n2"); got != 3 {
			t.Errorf("ringkv_hints_queued{peer=n2} = %v, want 3", got)
		}
		if got := series(mfs, "ringkv_breaker_state"); got != 2 {
			t.Errorf("got %d breaker state series, want 2 (closed, open)", got)
		}
		if b := stats.Snapshot(false).GetBreakers(); len(b) != 1 || b[0].GetPeer() != "n2" || b[0].GetState() != replica.BreakerOpen.Proto() {
			t.Errorf("snapshot breakers %v, want n2 open", b)
		}
		if _, err := stats.Prometheus().Gather(); err != nil {
			t.Errorf("gather: %v", err)
		}
	}
}

// gather collects c alone (prometheus/testutil.CollectAndLint does the same, but its package
// needs a module go.sum does not hold; promlint is the linter it wraps).
func gather(t *testing.T, c prometheus.Collector) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("register: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	return mfs
}

// value is the value of name's series whose peer label is peer (-1 when none).
func value(mfs []*dto.MetricFamily, name, peer string) float64 {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "peer" && l.GetValue() == peer {
					if g := m.GetGauge(); g != nil {
						return g.GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

func series(mfs []*dto.MetricFamily, name string) int {
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}
