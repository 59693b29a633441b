package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"ringkv/node/hints"
	"ringkv/node/replica"
	"ringkv/node/ring"
)

func TestAdminHandler(t *testing.T) {
	reg := New(Config{ID: "n1"})
	reg.ObserveOp(replica.OpGet, replica.RoleCoordinator, time.Millisecond, nil)
	var readyErr error
	srv := httptest.NewServer(AdminHandler(reg, func() error { return readyErr }))
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: read body: %v", path, err)
		}
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		path     string
		notReady bool
		code     int
		contains string
	}{
		{"/healthz", false, 200, "ok"},
		{"/healthz", true, 200, "ok"},
		{"/readyz", false, 200, "ready"},
		{"/readyz", true, 503, "awaiting admission"},
		{"/metrics", false, 200, `ringkv_ops_total{op="get",role="coordinator"} 1`},
		{"/metrics", false, 200, "go_goroutines"},
		{"/metrics", false, 200, "process_"},
		{"/debug/pprof/", false, 200, "goroutine"},
		{"/debug/pprof/goroutine?debug=2", false, 200, "goroutine"},
		{"/debug/pprof/cmdline", false, 200, ""},
		{"/debug/pprof/mutex?seconds=x", false, 400, "seconds"},
	}
	for _, tt := range tests {
		readyErr = nil
		if tt.notReady {
			readyErr = replica.ErrNotAdmitted
		}
		code, body := get(tt.path)
		if code != tt.code || !strings.Contains(body, tt.contains) {
			t.Errorf("GET %s (not ready %v): got %d %.80q, want %d containing %q", tt.path, tt.notReady, code, body, tt.code, tt.contains)
		}
	}
	for _, path := range []string{"/debug/pprof/heap", "/debug/pprof/mutex?seconds=1", "/debug/pprof/block?seconds=1"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_, err = profile.Parse(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil {
			t.Errorf("GET %s: got %d, parse error %v, want 200 and a profile", path, resp.StatusCode, err)
		}
	}
}

func TestPrometheusLint(t *testing.T) {
	rg := testRing(t, 3, 2, 8, "n1", "n2")
	for _, vnodeMetrics := range []bool{false, true} {
		reg := New(Config{
			ID: "n1", Ring: func() *ring.Ring { return rg }, Store: openStore(t), VnodeMetrics: vnodeMetrics,
			Breakers: func() []replica.Breaker {
				return []replica.Breaker{{Peer: "n2", State: replica.BreakerOpen, ConsecutiveFailures: 5}}
			},
		})
		reg.ObserveOp(replica.OpPut, replica.RoleCoordinator, time.Millisecond, errors.New("boom"))
		reg.ObserveVnode(42, true, 10)
		reg.SetHints(func() []hints.Queue {
			return []hints.Queue{{Peer: "n2", Count: 3, Bytes: 120, Queued: 5, Delivered: 1, Dropped: 1}, {Peer: "n3", Delivered: 2}}
		})
		mfs := gather(t, collector{reg})
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
		if _, err := reg.Prometheus().Gather(); err != nil {
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
