package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"ringkv/node/ring"
	"ringkv/node/store"
)

// BenchmarkHTTPServer: PUT and GET /v0/entity through the client API's server on loopback,
// over kept-alive connections written and read by hand (no client library on the other
// side), to a coordinator that answers at once: what the server and the handler cost a
// request on the coordinator. conns connections each keep one request in flight. cpu-µs/op
// is the process's CPU (server and the hand-written client) per request; gor/op the
// goroutines started per request.
func BenchmarkHTTPServer(b *testing.B) {
	view := readyView(b)
	// As the node serves it: a ConnLimit on the listener, told of idle connections.
	limit := NewConnLimit(1024)
	srv := NewHTTPServer(Data{Coordinator: valueCoordinator{bytes.Repeat([]byte("v"), 100)}, View: func() *ring.View { return view }, MaxValueSize: 1 << 20},
		HTTPConfig{ReadTimeout: time.Minute, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10, ConnState: limit.ConnState})
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ln := limit.Listener(tl)
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Shutdown() })
	body := bytes.Repeat([]byte("v"), 100)
	for _, op := range []string{"PUT", "GET"} {
		for _, conns := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s-c%d", op, conns), func(b *testing.B) {
				var req []byte
				req = fmt.Appendf(req, "%s /v0/entity?id=key-12345 HTTP/1.1\r\nHost: %s\r\n", op, ln.Addr())
				if op == "PUT" {
					req = fmt.Appendf(req, "Content-Length: %d\r\n\r\n%s", len(body), body)
				} else {
					req = append(req, "\r\n"...)
				}
				cs := make([]*rawConn, conns)
				for i := range cs {
					if cs[i], err = dialRaw(ln.Addr().String()); err != nil {
						b.Fatal(err)
					}
					defer cs[i].c.Close()
				}
				b.ReportAllocs()
				b.ResetTimer()
				cpu0, gor0 := processCPU(), goroutinesCreated()
				var wg sync.WaitGroup
				for i, c := range cs {
					n := b.N / conns
					if i < b.N%conns {
						n++
					}
					wg.Go(func() {
						for range n {
							if err := c.do(req); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
				b.ReportMetric(float64(goroutinesCreated()-gor0)/float64(b.N), "gor/op")
			})
		}
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// goroutinesCreated is the number of goroutines the process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// valueCoordinator takes every write and finds value under every key, at once.
type valueCoordinator struct{ value []byte }

func (v valueCoordinator) Get(context.Context, []byte, int, int) (store.Record, bool, error) {
	return store.Record{TS: 1, Value: v.value}, true, nil
}
func (valueCoordinator) Put(context.Context, []byte, []byte, int, int) (uint64, error) { return 1, nil }
func (valueCoordinator) Delete(context.Context, []byte, int, int) (uint64, error)      { return 1, nil }

// rawConn is a kept-alive HTTP/1.1 connection that sends a prepared request and reads the
// answer's head and its Content-Length body.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(addr string) (*rawConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawConn{c: c, r: bufio.NewReader(c)}, nil
}

func (c *rawConn) do(req []byte) error {
	if _, err := c.c.Write(req); err != nil {
		return err
	}
	n := 0
	for first := true; ; first = false {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if first && !bytes.HasPrefix(line, []byte("HTTP/1.1 2")) {
			return fmt.Errorf("answer %q", line)
		}
		if len(line) <= 2 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	_, err := c.r.Discard(n)
	return err
}
