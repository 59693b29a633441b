package admin

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func TestHandler(t *testing.T) {
	prom := prometheus.NewRegistry()
	ops := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ringkv_ops_total"}, []string{"op", "role"})
	ops.WithLabelValues("get", "coordinator").Inc()
	prom.MustRegister(ops, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var readyErr error
	srv := httptest.NewServer(Handler(prom, func() error { return readyErr }))
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
			readyErr = errors.New("awaiting admission")
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
