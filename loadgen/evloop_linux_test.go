package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEventLoopIdlesWhileTheLastAnswerIsSlow: once a connection of a loop has no more requests
// to send, the loop closes it. Kept open, a socket the server then closes (here after 20 ms
// idle) is readable at every wait of the level-triggered loop, which spun a core for as long as
// the slow answer of the other connection took.
func TestEventLoopIdlesWhileTheLastAnswerIsSlow(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one loop for both connections
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Query().Get("id"), "1") {
			time.Sleep(1500 * time.Millisecond)
		}
	}))
	srv.Config.IdleTimeout = 20 * time.Millisecond
	srv.Start()
	defer srv.Close()
	tgt := NewHTTPTarget(srv.URL, 2, 0, 0)
	defer tgt.Close()
	cfg := DefaultConfig()
	cfg.Rate, cfg.Warmup, cfg.Connections, cfg.Requests = 0, 0, 2, 2
	cfg.Keys, cfg.KeyDist, cfg.KeyPrefix = 2, KeyDist{Kind: DistSequential}, "k"
	cfg.Timeout = 5 * time.Second
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	}
	cpu0, wall0 := cpu(), time.Now()
	r, err := Run(context.Background(), cfg, tgt)
	if err != nil {
		t.Fatal(err)
	}
	used, wall := cpu()-cpu0, time.Since(wall0)
	if r.Requests != 2 || r.ErrorCount() != 0 {
		t.Fatalf("got %d requests, errors %v; want 2 and none", r.Requests, r.Errors)
	}
	if used > wall/3 {
		t.Errorf("the process used %s of CPU over %s waiting for one slow answer, want well under a third", used, wall.Round(time.Millisecond))
	}
}
