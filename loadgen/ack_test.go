package loadgen

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestOnAckOverTLS: over HTTPS (WithTLS), in an open and a closed loop, OnAck sees exactly
// the PUTs the server acknowledged (201), with the value the server stored, and no two with
// the same value; refused PUTs (every key ending in 7 gets 504) and GETs are not reported.
func TestOnAckOverTLS(t *testing.T) {
	for _, rate := range []float64{2000, 0} {
		var mu sync.Mutex
		stored := map[string]string{}
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.URL.Query().Get("id")
			if r.Method != http.MethodPut {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			if strings.HasSuffix(key, "7") {
				w.WriteHeader(http.StatusGatewayTimeout)
				return
			}
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			stored[key] = string(b)
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
		}))
		pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		tgt := NewHTTPTarget(srv.URL, 4, 2, 3).WithTLS(&tls.Config{RootCAs: pool})

		cfg := DefaultConfig()
		cfg.Rate, cfg.Warmup, cfg.Connections, cfg.Requests = rate, 0, 4, 400
		cfg.Keys, cfg.KeyDist, cfg.KeyPrefix, cfg.Workload = 1000, KeyDist{Kind: DistSequential}, "k", Mix{Get: 1, Put: 1}
		cfg.ValueSize = Size{Min: 2, Max: 30}
		cfg.MaxLag = 1e12
		var amu sync.Mutex
		acked := map[string]string{}
		values := map[string]bool{}
		cfg.OnAck = func(op Op, key string, value []byte) {
			amu.Lock()
			defer amu.Unlock()
			if op != OpPut {
				t.Errorf("OnAck op %s, want put", op)
			}
			acked[key] = string(value)
			if values[string(value)] {
				t.Errorf("OnAck: value %q acknowledged twice", value)
			}
			values[string(value)] = true
		}
		r, err := Run(context.Background(), cfg, tgt)
		tgt.Close()
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		amu.Lock()
		if len(stored) == 0 || len(acked) != len(stored) {
			t.Errorf("rate %g: OnAck saw %d writes, the server stored %d; want the same, > 0", rate, len(acked), len(stored))
		}
		for k, v := range stored {
			if acked[k] != v {
				t.Errorf("rate %g: key %s: OnAck value %q, stored %q", rate, k, acked[k], v)
			}
		}
		if r.Errors[KindUnavailable] == 0 || r.Errors[KindConnection] != 0 {
			t.Errorf("rate %g: errors %v, want some unavailable and no connection errors", rate, r.Errors)
		}
		amu.Unlock()
		mu.Unlock()
	}
}
