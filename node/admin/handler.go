// Package admin serves a node's admin listener (Handler: /metrics, /debug/pprof/*, /healthz,
// /readyz) and captures profiles of this process on demand (Capture, StreamProfile), for that
// listener and for the Admin gRPC service's Profile. It imports nothing of the node: the
// numbers come as a Prometheus gatherer, readiness as a function.
package admin

import (
	"net/http"
	"net/http/pprof"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the admin listener: /metrics (prom, node/metrics' registry), /debug/pprof/* (net/http/pprof,
// mounted on this handler's own mux; mutex and block take ?seconds=N and switch sampling on for
// the window, see Capture), /healthz (200 while the process runs) and /readyz (200 when ready
// returns nil, else 503 with its error). A nil ready counts as ready.
func Handler(prom prometheus.Gatherer, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(prom, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /debug/pprof/mutex", sampledProfile("mutex"))
	mux.HandleFunc("GET /debug/pprof/block", sampledProfile("block"))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ready != nil {
			if err := ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(err.Error() + "\n"))
				return
			}
		}
		w.Write([]byte("ready\n"))
	})
	return mux
}

// sampledProfile serves a mutex or block profile: with ?seconds=N through Capture (sampling
// switched on for the window); without it, or with ?debug=N, as net/http/pprof does.
func sampledProfile(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		sec := req.FormValue("seconds")
		if sec == "" || req.FormValue("debug") != "" {
			pprof.Handler(kind).ServeHTTP(w, req)
			return
		}
		n, err := strconv.Atoi(sec)
		if err != nil || n <= 0 || n > MaxSeconds {
			http.Error(w, "seconds: want an integer in 1.."+strconv.Itoa(MaxSeconds), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="`+kind+`"`)
		if err := Capture(req.Context(), kind, n, w); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}
}
