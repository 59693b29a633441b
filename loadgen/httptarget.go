package loadgen

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HTTPTarget sends requests to the HTTP API (/v0/entity) of one node over keep-alive
// connections, one per worker, like wrk: each worker writes its request on its own connection
// and reads the answer with readResponse (status, Content-Length, chunked bodies, Connection;
// no header map), with no goroutine in between (net/http's Transport costs two goroutine
// hand-offs per request, which on a small machine shows up in the latency it measures). Under
// Run, the request timeout is the connection's deadline and the run's end one AfterFunc per
// connection, not a context per request. A connection that fails or that the server closes is
// redialled on the worker's next request. Run's closed loop (Rate 0) does not use this path on
// Linux: it runs on event loops with sockets of their own (evloop_linux.go), except over TLS
// (WithTLS), where every worker runs on a goroutine of its own.
type HTTPTarget struct {
	host   string // host:port
	suffix string // &ack=A&from=F or ""
	dialer net.Dialer
	tls    *tls.Config // nil: plaintext

	mu    sync.Mutex
	conns map[int]*httpConn
}

type httpConn struct {
	c   net.Conn
	br  *bufio.Reader
	bw  *bufio.Writer
	buf []byte

	// Run's fast path (request): the connection's deadline, moved forward only when a request
	// needs a later one, and one AfterFunc per run context instead of one per request.
	dl      time.Time
	runCtx  context.Context
	stopRun func() bool
}

var _ Target = (*HTTPTarget)(nil)

// NewHTTPTarget targets the node whose HTTP API listens at addr (host:port, http://host:port
// or https://host:port; https needs WithTLS). conns is a hint of the number of workers. ack and
// from of 0 mean the cluster's defaults. Close closes the connections.
func NewHTTPTarget(addr string, conns int, ack, from int) *HTTPTarget {
	addr = strings.TrimPrefix(addr, "http://")
	addr = strings.TrimPrefix(addr, "https://")
	addr = strings.TrimRight(addr, "/")
	var suffix string
	if ack > 0 {
		suffix += "&ack=" + strconv.Itoa(ack)
	}
	if from > 0 {
		suffix += "&from=" + strconv.Itoa(from)
	}
	return &HTTPTarget{
		host:   addr,
		suffix: suffix,
		dialer: net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		conns:  make(map[int]*httpConn, conns),
	}
}

// WithTLS makes every connection of t speak TLS with cfg (a node started with --certs-dir
// serves HTTPS); the server name defaults to the address's host. Call it before the first
// request. It returns t.
func (t *HTTPTarget) WithTLS(cfg *tls.Config) *HTTPTarget {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(t.host); err == nil {
			cfg.ServerName = host
		}
	}
	t.tls = cfg
	return t
}

// Close closes every connection.
func (t *HTTPTarget) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for i, c := range t.conns {
		if c.stopRun != nil {
			c.stopRun()
		}
		errs = append(errs, c.c.Close())
		delete(t.conns, i)
	}
	return errors.Join(errs...)
}

// Get implements Target.
func (t *HTTPTarget) Get(ctx context.Context, conn int, key string) Kind {
	return t.do(ctx, conn, OpGet, key, nil)
}

// Put implements Target.
func (t *HTTPTarget) Put(ctx context.Context, conn int, key string, value []byte) Kind {
	return t.do(ctx, conn, OpPut, key, value)
}

// Delete implements Target.
func (t *HTTPTarget) Delete(ctx context.Context, conn int, key string) Kind {
	return t.do(ctx, conn, OpDelete, key, nil)
}

func (t *HTTPTarget) conn(ctx context.Context, i int) (*httpConn, error) {
	t.mu.Lock()
	c := t.conns[i]
	t.mu.Unlock()
	if c != nil {
		return c, nil
	}
	nc, err := t.dialer.DialContext(ctx, "tcp", t.host)
	if err != nil {
		return nil, err
	}
	if t.tls != nil {
		tc := tls.Client(nc, t.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("tls handshake with %s: %w", t.host, err)
		}
		nc = tc
	}
	c = &httpConn{c: nc, br: bufio.NewReaderSize(nc, 16<<10), bw: bufio.NewWriterSize(nc, 16<<10)}
	t.mu.Lock()
	t.conns[i] = c
	t.mu.Unlock()
	return c, nil
}

func (t *HTTPTarget) drop(i int, c *httpConn) {
	if c.stopRun != nil {
		c.stopRun()
	}
	c.c.Close()
	t.mu.Lock()
	if t.conns[i] == c {
		delete(t.conns, i)
	}
	t.mu.Unlock()
}

// request implements deadlineTarget: Run's path, without a context per request.
func (t *HTTPTarget) request(ctx context.Context, i int, op Op, key string, value []byte, deadline time.Time) Kind {
	for {
		c, err := t.conn(ctx, i)
		if err != nil {
			return httpErrKind(ctx, err)
		}
		if c.runCtx != ctx {
			if c.stopRun != nil && !c.stopRun() {
				// The previous run's AfterFunc fired (or is firing) and poisons the
				// deadline: start afresh on a new connection.
				t.drop(i, c)
				continue
			}
			c.runCtx = ctx
			c.stopRun = context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
			c.dl = time.Time{}
		}
		// Never earlier than deadline; at most 1/16 of the timeout later, so the
		// connection's deadline moves about once per timeout/16, not per request.
		if c.dl.Before(deadline) {
			c.dl = deadline.Add(time.Until(deadline) / 16)
			_ = c.c.SetDeadline(c.dl)
		}
		return t.exchange(ctx, i, c, op, key, value)
	}
}

func (t *HTTPTarget) do(ctx context.Context, i int, op Op, key string, value []byte) Kind {
	c, err := t.conn(ctx, i)
	if err != nil {
		return httpErrKind(ctx, err)
	}
	if c.stopRun != nil {
		c.stopRun() // the connection leaves Run's fast path
		c.stopRun, c.runCtx = nil, nil
	}
	d, _ := ctx.Deadline() // zero: none
	c.dl = d
	_ = c.c.SetDeadline(d)
	// A caller's cancel unblocks the read too.
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	return t.exchange(ctx, i, c, op, key, value)
}

// appendRequest appends the request of op on key to b: the same bytes as wrk's
// wrk.format(method, path) for a GET (no Content-Length without a body).
func (t *HTTPTarget) appendRequest(b []byte, op Op, key, value []byte) []byte {
	method := http.MethodGet
	switch op {
	case OpPut:
		method = http.MethodPut
	case OpDelete:
		method = http.MethodDelete
	}
	b = append(b, method...)
	b = append(b, " /v0/entity?id="...)
	b = appendQueryEscape(b, key)
	b = append(b, t.suffix...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, t.host...)
	if op == OpPut {
		b = append(b, "\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(value)), 10)
	}
	b = append(b, "\r\n\r\n"...)
	return append(b, value...)
}

// appendQueryEscape appends key escaped as url.QueryEscape does, without allocating when
// nothing needs escaping (keys are usually prefix + digits).
func appendQueryEscape(b, key []byte) []byte {
	for _, ch := range key {
		if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' ||
			ch == '-' || ch == '_' || ch == '.' || ch == '~') {
			return append(b, url.QueryEscape(string(key))...)
		}
	}
	return append(b, key...)
}

// kindOfStatus maps an HTTP status to the outcome of a request.
func kindOfStatus(code int) Kind {
	switch {
	case code >= 200 && code < 300:
		return KindOK
	case code == http.StatusNotFound:
		return KindNotFound
	case code == http.StatusGatewayTimeout || code == http.StatusServiceUnavailable:
		return KindUnavailable
	case code >= 400 && code < 500:
		return KindClient
	}
	return KindOther
}

// exchange writes one request on c and reads its answer.
func (t *HTTPTarget) exchange(ctx context.Context, i int, c *httpConn, op Op, key string, value []byte) Kind {
	c.buf = t.appendRequest(c.buf[:0], op, []byte(key), value)
	if _, err := c.bw.Write(c.buf); err != nil {
		t.drop(i, c)
		return httpErrKind(ctx, err)
	}
	if err := c.bw.Flush(); err != nil {
		t.drop(i, c)
		return httpErrKind(ctx, err)
	}
	code, keep, err := readResponse(c.br)
	if err != nil {
		t.drop(i, c)
		return httpErrKind(ctx, err)
	}
	if !keep {
		t.drop(i, c)
	}
	return kindOfStatus(code)
}

func httpErrKind(ctx context.Context, err error) Kind {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return KindTimeout
	case errors.Is(ctx.Err(), context.Canceled):
		return kindCanceled
	case errors.Is(err, os.ErrDeadlineExceeded):
		return KindTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return KindTimeout
	}
	return KindConnection
}

// String names the target.
func (t *HTTPTarget) String() string { return fmt.Sprintf("http %s", t.host) }
