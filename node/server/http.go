package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/rpcerr"
)

// Coordinator is the data path the KV and HTTP APIs call (replica.Coordinator). Safe for
// concurrent use. Get returns found=false for an absent key and for a tombstone.
type Coordinator interface {
	Get(ctx context.Context, key []byte, ack, from int) (store.Record, bool, error)
	// Put must not keep key or value once it returns: the HTTP API reuses their buffers.
	Put(ctx context.Context, key, value []byte, ack, from int) (uint64, error)
	Delete(ctx context.Context, key []byte, ack, from int) (uint64, error)
}

// Data is what the client APIs (HTTP and gRPC KV) need.
type Data struct {
	Coordinator Coordinator
	// View returns the ring the node routes by; nil while the node awaits admission.
	View func() *ring.View
	// Ready, when set, is nil while the node serves clients (else replica.ErrNotAdmitted or
	// another reason, answered 503 / Unavailable); nil func = ready whenever View has a ring.
	Ready func() error
	// MaxValueSize bounds the body of an HTTP PUT, in bytes (the Coordinator checks the
	// value of every write against its own limit).
	MaxValueSize int64
	Logger       *slog.Logger
}

// ready is nil while the node serves clients: it has a ring (else replica.ErrNotAdmitted)
// and Ready agrees.
func (d Data) ready() error {
	if v := d.View(); v == nil || v.Current == nil {
		return replica.ErrNotAdmitted
	}
	if d.Ready != nil {
		return d.Ready()
	}
	return nil
}

// HTTPConfig is how the v0 HTTP API's server treats its connections.
type HTTPConfig struct {
	// ReadTimeout bounds reading one request, header and body; IdleTimeout bounds the wait
	// for a kept-alive connection's next request.
	ReadTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers (a larger one is answered 431).
	MaxHeaderBytes int
	// ConnState, when set, is told of each connection's states, as http.Server's hook is.
	ConnState func(net.Conn, http.ConnState)
}

// NewHTTPServer returns the server of the v0 HTTP API: /v0/entity and /v0/status; any other
// path answers 400, as the course's servers do. Serve it on a listener; Shutdown drains it.
//
// It is fasthttp rather than net/http: per request, net/http starts a goroutine (the
// background read of a kept-alive connection) and allocates its request and response (19
// allocations per PUT), 10–14 µs of CPU more per request than fasthttp at 16 connections
// (BenchmarkHTTPServer, docs/bench.md, session 16). fasthttp serves each connection from a
// pool of workers and reuses its request and response.
func NewHTTPServer(d Data, c HTTPConfig) *fasthttp.Server {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	h := &httpAPI{d: d}
	s := &fasthttp.Server{
		Handler:     h.serve,
		ReadTimeout: c.ReadTimeout, IdleTimeout: c.IdleTimeout,
		ReadBufferSize:     c.MaxHeaderBytes,
		MaxRequestBodySize: int(d.MaxValueSize),
		// Every body reaches the handler as a stream (the first 8 KiB already read): one over
		// MaxRequestBodySize is answered 413 without being read, and fasthttp then discards
		// up to 256 KiB of it so that the client reads the answer, or closes the connection.
		StreamRequestBody: true,
		// Values are raw bytes whatever their Content-Type claims.
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true, NoDefaultContentType: true,
		// A drain tells kept-alive clients to reconnect (to another node).
		CloseOnShutdown: true,
		Logger:          httpLogger{d.Logger},
		// Its errors would quote the request (keys, values) otherwise.
		SecureErrorLogMessage: true,
	}
	if c.ConnState != nil {
		s.ConnState = func(conn net.Conn, st fasthttp.ConnState) { c.ConnState(conn, connStates[st]) }
	}
	return s
}

// connStates maps fasthttp's connection states to net/http's (an array: it is read twice per
// request).
var connStates = [...]http.ConnState{
	fasthttp.StateNew: http.StateNew, fasthttp.StateActive: http.StateActive, fasthttp.StateIdle: http.StateIdle,
	fasthttp.StateHijacked: http.StateHijacked, fasthttp.StateClosed: http.StateClosed,
}

// httpLogger writes fasthttp's own errors (a connection it could not serve) as warnings.
type httpLogger struct{ l *slog.Logger }

func (l httpLogger) Printf(format string, args ...any) {
	l.l.Warn("http server", "err", fmt.Sprintf(format, args...))
}

type httpAPI struct{ d Data }

func (h *httpAPI) serve(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/v0/entity":
		h.entity(ctx)
	case "/v0/status":
		h.status(ctx)
	default:
		h.fail(ctx, fmt.Errorf("%w: %s", ErrUnknownPath, ctx.Path()))
	}
}

func (h *httpAPI) status(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		h.fail(ctx, fmt.Errorf("%w: %s /v0/status", ErrMethodNotAllowed, ctx.Method()))
		return
	}
	if err := h.d.ready(); err != nil {
		h.fail(ctx, err)
		return
	}
	ctx.SetContentTypeBytes(textPlain)
	ctx.SetBodyString("OK\n")
}

func (h *httpAPI) entity(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsPut() && !ctx.IsDelete() {
		ctx.Response.Header.Set("Allow", "GET, PUT, DELETE")
		h.fail(ctx, fmt.Errorf("%w: %s /v0/entity", ErrMethodNotAllowed, ctx.Method()))
		return
	}
	if err := h.d.ready(); err != nil {
		h.fail(ctx, err)
		return
	}
	e, err := ParseEntityQuery(string(ctx.URI().QueryString()))
	if err != nil {
		h.fail(ctx, err)
		return
	}
	// Not ctx: a fasthttp RequestCtx is done when its server starts to shut down, and a
	// drain lets the requests in flight finish. The coordinator bounds each replica call.
	rctx := context.Background()
	switch {
	case ctx.IsGet():
		rec, found, err := h.d.Coordinator.Get(rctx, e.Key, e.Ack, e.From)
		if err == nil && !found {
			err = ErrNotFound
		}
		if err != nil {
			h.fail(ctx, err)
			return
		}
		ctx.SetContentTypeBytes(octetStream)
		ctx.SetBody(rec.Value)
	case ctx.IsPut():
		value, pooled, err := h.readValue(ctx)
		if err != nil {
			h.fail(ctx, err)
			return
		}
		_, err = h.d.Coordinator.Put(rctx, e.Key, value, e.Ack, e.From)
		if pooled != nil {
			bodies.Put(pooled) // Put keeps no reference to value
		}
		if err != nil {
			h.fail(ctx, err)
			return
		}
		ctx.SetStatusCode(fasthttp.StatusCreated)
	default: // DELETE
		if _, err := h.d.Coordinator.Delete(rctx, e.Key, e.Ack, e.From); err != nil {
			h.fail(ctx, err)
			return
		}
		ctx.SetStatusCode(fasthttp.StatusAccepted)
	}
}

var (
	octetStream = []byte("application/octet-stream")
	textPlain   = []byte("text/plain; charset=utf-8")
)

// pooledBody bounds the PUT bodies read into a buffer of bodies; a larger one gets its own.
const pooledBody = 64 << 10

// bodies holds *[]byte buffers of cap pooledBody for PUT bodies: the coordinator copies a
// value before it sends it, so a body's buffer is free again once Put returns.
var bodies = sync.Pool{New: func() any { b := make([]byte, pooledBody); return &b }}

// readValue reads a PUT body of at most MaxValueSize bytes from ctx's body stream (the server
// streams every body: one past the limit is answered 413 without being read). When pooled is
// not nil the value lies in it, and the caller puts it back into bodies once it is done with
// the value.
func (h *httpAPI) readValue(ctx *fasthttp.RequestCtx) (value []byte, pooled *[]byte, err error) {
	limit := h.d.MaxValueSize
	n := int64(ctx.Request.Header.ContentLength())
	if n > limit {
		return nil, nil, fmt.Errorf("%w: body is %d bytes, limit %d", replica.ErrValueTooLarge, n, limit)
	}
	body := ctx.RequestBodyStream()
	if body == nil {
		return nil, nil, nil // no body: an empty value
	}
	if n >= 0 {
		// The length is known (and checked above): one buffer of exactly that size, a pooled
		// one for a small body.
		var b []byte
		if n <= pooledBody {
			pooled = bodies.Get().(*[]byte)
			b = (*pooled)[:n]
		} else {
			b = make([]byte, n)
		}
		if _, err := io.ReadFull(body, b); err != nil {
			if pooled != nil {
				bodies.Put(pooled)
			}
			return nil, nil, fmt.Errorf("%w: read body: %v", replica.ErrInvalidArgument, err)
		}
		return b, pooled, nil
	}
	// Chunked: the length is known once read.
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("%w: read body: %v", replica.ErrInvalidArgument, err)
	case int64(len(b)) > limit:
		return nil, nil, fmt.Errorf("%w: body over the limit of %d bytes", replica.ErrValueTooLarge, limit)
	}
	return b, nil, nil
}

// fail writes err's status with a one-line reason.
func (h *httpAPI) fail(ctx *fasthttp.RequestCtx, err error) {
	code := rpcerr.HTTPStatus(err)
	if code >= 500 && code != http.StatusGatewayTimeout && code != http.StatusServiceUnavailable {
		h.d.Logger.Warn("http request failed", "status", code, "err", err)
	}
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetContentTypeBytes(textPlain)
	ctx.SetStatusCode(code)
	ctx.SetBodyString(err.Error() + "\n")
}
