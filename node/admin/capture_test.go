package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"ringkv/internal/eventually"
	"ringkv/internal/spin"
)

// burnCPU spins until stop is closed; the CPU profile must show it.
func burnCPU(stop <-chan struct{}) uint64 {
	var x uint64 = 1
	for {
		select {
		case <-stop:
			return x
		default:
		}
		for i := range 100_000 {
			x = x*6364136223846793005 + uint64(i)
		}
	}
}

// contendRounds counts the critical sections contend's goroutines have run.
var contendRounds atomic.Int64

// contend makes goroutines fight over a mutex until stop is closed.
func contend(stop <-chan struct{}) { spin.Contend(stop, 50*time.Microsecond, &contendRounds) }

func hasFunction(p *profile.Profile, name string) bool {
	for _, s := range p.Sample {
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if l.Function != nil && strings.Contains(l.Function.Name, name) {
					return true
				}
			}
		}
	}
	return false
}

func TestCapture(t *testing.T) {
	tests := []struct {
		kind     string
		seconds  int
		load     func(stop <-chan struct{})
		wantFunc string // a function some sample must contain
	}{
		{"cpu", 1, func(stop <-chan struct{}) { burnCPU(stop) }, "admin.burnCPU"},
		{"heap", 0, nil, ""},
		{"allocs", 0, nil, ""},
		{"goroutine", 0, nil, "admin.TestCapture"},
		{"mutex", 1, contend, "spin.Contend"},
		{"block", 1, contend, "spin.Contend"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			prevMutex := runtime.SetMutexProfileFraction(-1)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			switch tt.kind {
			case "mutex":
				// The contention starts once Capture has switched mutex sampling on. The
				// runtime charges a wait only if it began with sampling on, and a waiter
				// queued in front of a stream of waiters passes its start time on to them:
				// contention that began before, and never lets the queue empty, stays
				// invisible (this test's load started first failed every time).
				wg.Go(func() {
					for runtime.SetMutexProfileFraction(-1) != captureMutexFraction {
						select {
						case <-stop:
							return
						case <-time.After(time.Millisecond):
						}
					}
					tt.load(stop)
				})
			default:
				if tt.load != nil {
					wg.Go(func() { tt.load(stop) })
				}
			}
			before := contendRounds.Load()
			var buf bytes.Buffer
			err := Capture(context.Background(), tt.kind, tt.seconds, &buf)
			during := contendRounds.Load() - before
			close(stop)
			wg.Wait()
			if err != nil {
				t.Fatalf("Capture(%s): %v", tt.kind, err)
			}
			p, err := profile.Parse(&buf)
			if err != nil {
				t.Fatalf("parse %s profile: %v", tt.kind, err)
			}
			if tt.kind != "heap" && tt.kind != "allocs" && len(p.Sample) == 0 {
				t.Errorf("%s: got no samples, want some (%d rounds of contention in the window)", tt.kind, during)
			}
			if tt.wantFunc != "" && !hasFunction(p, tt.wantFunc) {
				t.Errorf("%s: got no sample in %s, want some", tt.kind, tt.wantFunc)
			}
			if got := runtime.SetMutexProfileFraction(-1); got != prevMutex {
				t.Errorf("mutex profile fraction after capture: got %d, want %d restored", got, prevMutex)
			}
		})
	}
}

func TestCaptureTrace(t *testing.T) {
	var buf bytes.Buffer
	if err := Capture(context.Background(), "trace", 1, &buf); err != nil {
		t.Fatalf("Capture(trace): %v", err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("go 1.")) {
		t.Errorf("trace: got header %q, want a Go execution trace", buf.Bytes()[:min(buf.Len(), 16)])
	}
}

func TestCaptureErrors(t *testing.T) {
	if err := Capture(context.Background(), "threads", 0, &bytes.Buffer{}); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("unknown kind: got %v, want ErrUnknownKind", err)
	}

	// Two CPU captures at once: one runs, the other is refused (the runtime has one CPU profiler).
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- Capture(context.Background(), "cpu", 1, &bytes.Buffer{}) }()
	}
	var ok, busy int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, ErrCaptureBusy):
			busy++
		default:
			t.Errorf("concurrent cpu capture: got %v, want nil or ErrCaptureBusy", err)
		}
	}
	if ok != 1 || busy != 1 {
		t.Errorf("two concurrent cpu captures: got %d ok and %d busy, want 1 and 1", ok, busy)
	}

	// A cancelled capture stops early with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Capture(ctx, "cpu", 30, &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled capture: got %v, want context.Canceled", err)
	}
}

func TestStreamProfile(t *testing.T) {
	var got bytes.Buffer
	var chunks int
	err := StreamProfile(context.Background(), "goroutine", 0, func(b []byte) error {
		if len(b) == 0 || len(b) > ChunkSize {
			t.Errorf("chunk of %d bytes, want 1..%d", len(b), ChunkSize)
		}
		chunks++
		got.Write(b)
		return nil
	})
	if err != nil {
		t.Fatalf("StreamProfile: %v", err)
	}
	if _, err := profile.Parse(&got); err != nil {
		t.Errorf("parse streamed profile (%d chunks): %v", chunks, err)
	}

	// Chunking of a large output, and a failing send.
	var sizes []int
	cw := &chunkWriter{send: func(b []byte) error { sizes = append(sizes, len(b)); return nil }, buf: make([]byte, 0, ChunkSize)}
	cw.Write(make([]byte, ChunkSize+10))
	cw.Write(make([]byte, ChunkSize))
	cw.flush()
	if want := []int{ChunkSize, ChunkSize, 10}; !equalInts(sizes, want) {
		t.Errorf("chunk sizes: got %v, want %v", sizes, want)
	}
	wantErr := errors.New("stream broken")
	err = StreamProfile(context.Background(), "heap", 0, func([]byte) error { return wantErr })
	if !errors.Is(err, wantErr) {
		t.Errorf("failing send: got %v, want %v", err, wantErr)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCaptureSeesOlderContention: contention that began before the capture and never lets up
// shows in a mutex capture once KeepMutexWaitsTimed has run (without it the capture came back
// empty every time: the runtime times only waits that began with sampling on).
func TestCaptureSeesOlderContention(t *testing.T) {
	prev := runtime.SetMutexProfileFraction(-1)
	runtime.SetMutexProfileFraction(0)
	t.Cleanup(func() { runtime.SetMutexProfileFraction(prev) })
	KeepMutexWaitsTimed()
	if got := runtime.SetMutexProfileFraction(-1); got != backgroundMutexFraction {
		t.Fatalf("mutex profile fraction = %d after KeepMutexWaitsTimed, want %d", got, backgroundMutexFraction)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { contend(stop) })
	defer func() { close(stop); wg.Wait() }()
	from := contendRounds.Load()
	eventually.Succeeds(t, 10*time.Second, func() error {
		if n := contendRounds.Load() - from; n < 50 {
			return fmt.Errorf("%d rounds of contention so far, want 50 before the capture", n)
		}
		return nil
	})
	var buf bytes.Buffer
	if err := Capture(context.Background(), "mutex", 1, &buf); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !hasFunction(p, "spin.Contend") {
		t.Errorf("mutex capture of contention older than it: no sample in spin.Contend (%d samples)", len(p.Sample))
	}
	if got := runtime.SetMutexProfileFraction(-1); got != backgroundMutexFraction {
		t.Errorf("mutex profile fraction after capture = %d, want %d restored", got, backgroundMutexFraction)
	}
}
