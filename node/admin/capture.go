package admin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// Kinds are the profile kinds Capture takes.
var Kinds = [...]string{"cpu", "heap", "allocs", "mutex", "block", "goroutine", "trace"}

// DefaultSeconds is the capture length of a timed kind when Capture is given 0 seconds
// (0 for the instant kinds).
func DefaultSeconds(kind string) int {
	switch kind {
	case "cpu", "mutex", "block":
		return 5
	case "trace":
		return 1
	}
	return 0
}

// MaxSeconds bounds a timed capture.
const MaxSeconds = 300

// While a mutex or block capture runs the runtime samples contention events at these rates.
const (
	captureMutexFraction = 5      // one in 5 contention events
	captureBlockRateNs   = 10_000 // one event per 10 µs blocked
)

// sampling holds the process-wide mutex and block profiling rates while captures run. The
// rates are process state in the runtime, so this guard is process state too: the first
// capture of a kind switches the rate on and the last one restores what was there before.
var sampling struct {
	mu                 sync.Mutex
	mutexRefs, blkRefs int
	mutexPrev, blkPrev int
}

// Capture writes one profile of this process to w, in the gzipped protobuf format go tool pprof
// reads (for trace: the runtime/trace format go tool trace reads). kind is one of Kinds. cpu
// and trace record for seconds (0 = DefaultSeconds); mutex and block switch the runtime's
// sampling on for seconds and write the events of that window; heap, allocs and goroutine are
// instant. Only one cpu and one trace capture can run in the process at a time: another one
// fails with ErrCaptureBusy. If ctx ends first, Capture stops and returns ctx.Err(); what it
// wrote is then incomplete.
func Capture(ctx context.Context, kind string, seconds int, w io.Writer) error {
	if seconds <= 0 {
		seconds = DefaultSeconds(kind)
	}
	if seconds > MaxSeconds {
		return fmt.Errorf("capture %s for %d s: at most %d s", kind, seconds, MaxSeconds)
	}
	d := time.Duration(seconds) * time.Second
	switch kind {
	case "cpu":
		if err := pprof.StartCPUProfile(w); err != nil {
			return fmt.Errorf("capture cpu: %w (%v)", ErrCaptureBusy, err)
		}
		err := wait(ctx, d)
		pprof.StopCPUProfile()
		return err
	case "trace":
		if err := trace.Start(w); err != nil {
			return fmt.Errorf("capture trace: %w (%v)", ErrCaptureBusy, err)
		}
		err := wait(ctx, d)
		trace.Stop()
		return err
	case "heap", "allocs", "goroutine":
		if err := pprof.Lookup(kind).WriteTo(w, 0); err != nil {
			return fmt.Errorf("capture %s: %w", kind, err)
		}
		return nil
	case "mutex", "block":
		return captureDelta(ctx, kind, d, w)
	}
	return fmt.Errorf("capture %q: %w (want one of cpu, heap, allocs, mutex, block, goroutine, trace)", kind, ErrUnknownKind)
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// captureDelta switches sampling on, takes the profile before and after d, and writes the
// difference (what net/http/pprof does for ?seconds=N, plus the rate switch).
func captureDelta(ctx context.Context, kind string, d time.Duration, w io.Writer) error {
	samplingOn(kind)
	defer samplingOff(kind)
	p0, err := lookupProfile(kind)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := wait(ctx, d); err != nil {
		return err
	}
	p1, err := lookupProfile(kind)
	if err != nil {
		return err
	}
	p0.Scale(-1)
	delta, err := profile.Merge([]*profile.Profile{p0, p1})
	if err != nil {
		return fmt.Errorf("capture %s: delta: %w", kind, err)
	}
	delta.TimeNanos = start.UnixNano()
	delta.DurationNanos = time.Since(start).Nanoseconds()
	if err := delta.Write(w); err != nil {
		return fmt.Errorf("capture %s: %w", kind, err)
	}
	return nil
}

func lookupProfile(kind string) (*profile.Profile, error) {
	var buf bytes.Buffer
	if err := pprof.Lookup(kind).WriteTo(&buf, 0); err != nil {
		return nil, fmt.Errorf("capture %s: %w", kind, err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		return nil, fmt.Errorf("capture %s: parse: %w", kind, err)
	}
	return p, nil
}

// backgroundMutexFraction is the mutex sampling KeepMutexWaitsTimed leaves on between
// captures: one contention event in 1000 is recorded (cheap), but every wait is timed.
const backgroundMutexFraction = 1000

// KeepMutexWaitsTimed switches mutex sampling on at one event in 1000, unless sampling is
// already on. The runtime charges a wait to the mutex profile only if sampling was on when the
// wait began, and a goroutine queued in front of the waiters passes its start on to them: with
// sampling off until a capture, contention that began before the capture and never lets the
// queue empty stays out of the capture entirely. A serving process calls it once (node.Main, node.Start).
func KeepMutexWaitsTimed() {
	sampling.mu.Lock()
	defer sampling.mu.Unlock()
	if sampling.mutexRefs == 0 && runtime.SetMutexProfileFraction(-1) == 0 {
		runtime.SetMutexProfileFraction(backgroundMutexFraction)
	}
}

func samplingOn(kind string) {
	sampling.mu.Lock()
	defer sampling.mu.Unlock()
	switch kind {
	case "mutex":
		if sampling.mutexRefs == 0 {
			sampling.mutexPrev = runtime.SetMutexProfileFraction(captureMutexFraction)
		}
		sampling.mutexRefs++
	case "block":
		if sampling.blkRefs == 0 {
			// SetBlockProfileRate has no getter; a rate set outside Capture is not restored.
			sampling.blkPrev = 0
			runtime.SetBlockProfileRate(captureBlockRateNs)
		}
		sampling.blkRefs++
	}
}

func samplingOff(kind string) {
	sampling.mu.Lock()
	defer sampling.mu.Unlock()
	switch kind {
	case "mutex":
		if sampling.mutexRefs--; sampling.mutexRefs == 0 {
			runtime.SetMutexProfileFraction(sampling.mutexPrev)
		}
	case "block":
		if sampling.blkRefs--; sampling.blkRefs == 0 {
			runtime.SetBlockProfileRate(sampling.blkPrev)
		}
	}
}

// ChunkSize is the size of the chunks StreamProfile sends.
const ChunkSize = 64 << 10

// StreamProfile runs Capture and sends its output in chunks of up to ChunkSize bytes, for the
// Admin Profile RPC. send must not keep the slice after it returns. A send error stops the
// stream and is returned.
func StreamProfile(ctx context.Context, kind string, seconds int, send func([]byte) error) error {
	cw := &chunkWriter{send: send, buf: make([]byte, 0, ChunkSize)}
	if err := Capture(ctx, kind, seconds, cw); err != nil {
		return err
	}
	if cw.err != nil {
		return cw.err
	}
	return cw.flush()
}

type chunkWriter struct {
	send func([]byte) error
	buf  []byte
	err  error
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), ChunkSize-len(c.buf))
		c.buf = append(c.buf, p[:k]...)
		p = p[k:]
		if len(c.buf) == ChunkSize {
			if err := c.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (c *chunkWriter) flush() error {
	if len(c.buf) == 0 || c.err != nil {
		return c.err
	}
	if err := c.send(c.buf); err != nil {
		c.err = fmt.Errorf("send profile chunk: %w", err)
		return c.err
	}
	c.buf = c.buf[:0]
	return nil
}

// Process identifies the OS process, "host/pid/start" (start in Unix nanoseconds, so that a
// reused pid is another process): the unit of the runtime's profiles, which every node the
// process serves shares (kvctl demo runs several).
var Process = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano())
})
