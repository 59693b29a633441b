package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"ringkv/node/ring"
	"ringkv/node/store"
)

// BenchmarkHTTPServer: PUT and GET /v0/entity through a real http.Server on loopback, over
// kept-alive connections written and read by hand (no client library on the other side), to a
// coordinator that answers at once: what net/http and the handler cost a request on the
// coordinator. conns connections each keep one request in flight.
func BenchmarkHTTPServer(b *testing.B) {
	view := readyView(b)
	// As the node serves it: a ConnLimit on the listener, told of idle connections, and
	// read timeouts (net/http sets a deadline per request).
	limit := NewConnLimit(1024)
	srv := &http.Server{
		Handler:   NewHTTP(Data{Coordinator: valueCoordinator{bytes.Repeat([]byte("v"), 100)}, View: func() *ring.View { return view }, MaxValueSize: 1 << 20}),
		ConnState: limit.ConnState, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: time.Minute,
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ln := limit.Listener(tl)
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
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
			})
		}
	}
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
