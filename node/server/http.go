package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

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

// NewHTTP returns the v0 HTTP API handler: /v0/entity and /v0/status; any other path
// answers 400, as the course's servers do.
func NewHTTP(d Data) http.Handler {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return &httpAPI{d: d}
}

type httpAPI struct{ d Data }

func (h *httpAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v0/entity":
		h.entity(w, r)
	case "/v0/status":
		h.status(w, r)
	default:
		h.fail(w, fmt.Errorf("%w: %s", ErrUnknownPath, r.URL.Path))
	}
}

func (h *httpAPI) status(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.fail(w, fmt.Errorf("%w: %s /v0/status", ErrMethodNotAllowed, r.Method))
		return
	}
	if err := h.d.ready(); err != nil {
		h.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "OK\n")
}

func (h *httpAPI) entity(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodPut, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, PUT, DELETE")
		h.fail(w, fmt.Errorf("%w: %s /v0/entity", ErrMethodNotAllowed, r.Method))
		return
	}
	if err := h.d.ready(); err != nil {
		h.fail(w, err)
		return
	}
	e, err := ParseEntityQuery(r.URL.RawQuery)
	if err != nil {
		h.fail(w, err)
		return
	}
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet:
		rec, found, err := h.d.Coordinator.Get(ctx, e.Key, e.Ack, e.From)
		if err == nil && !found {
			err = ErrNotFound
		}
		if err != nil {
			h.fail(w, err)
			return
		}
		w.Header()["Content-Type"] = octetStream // not Set: no slice per request
		w.WriteHeader(http.StatusOK)
		w.Write(rec.Value)
	case http.MethodPut:
		value, pooled, err := h.readValue(w, r)
		if err != nil {
			h.fail(w, err)
			return
		}
		_, err = h.d.Coordinator.Put(ctx, e.Key, value, e.Ack, e.From)
		if pooled != nil {
			bodies.Put(pooled) // Put keeps no reference to value
		}
		if err != nil {
			h.fail(w, err)
			return
		}
		w.WriteHeader(http.StatusCreated)
	case http.MethodDelete:
		if _, err := h.d.Coordinator.Delete(ctx, e.Key, e.Ack, e.From); err != nil {
			h.fail(w, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

// octetStream is the Content-Type of a GET's answer, shared by every answer: net/http copies
// the header map before it writes it.
var octetStream = []string{"application/octet-stream"}

// pooledBody bounds the PUT bodies read into a buffer of bodies; a larger one gets its own.
const pooledBody = 64 << 10

// bodies holds *[]byte buffers of cap pooledBody for PUT bodies: the coordinator copies a
// value before it sends it, so a body's buffer is free again once Put returns.
var bodies = sync.Pool{New: func() any { b := make([]byte, pooledBody); return &b }}

// readValue reads a PUT body of at most MaxValueSize bytes. When pooled is not nil the value
// lies in it, and the caller puts it back into bodies once it is done with the value.
func (h *httpAPI) readValue(w http.ResponseWriter, r *http.Request) (value []byte, pooled *[]byte, err error) {
	limit := h.d.MaxValueSize
	if r.ContentLength > limit {
		return nil, nil, fmt.Errorf("%w: body is %d bytes, limit %d", replica.ErrValueTooLarge, r.ContentLength, limit)
	}
	if r.ContentLength >= 0 {
		// The length is known (and checked above): one buffer of exactly that size (a pooled
		// one for a small body) rather than io.ReadAll's doubling from 512 bytes. net/http
		// ends the body at ContentLength.
		var b []byte
		if r.ContentLength <= pooledBody {
			pooled = bodies.Get().(*[]byte)
			b = (*pooled)[:r.ContentLength]
		} else {
			b = make([]byte, r.ContentLength)
		}
		if _, err := io.ReadFull(r.Body, b); err != nil {
			if pooled != nil {
				bodies.Put(pooled)
			}
			return nil, nil, fmt.Errorf("%w: read body: %v", replica.ErrInvalidArgument, err)
		}
		return b, pooled, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, nil, fmt.Errorf("%w: body over the limit of %d bytes", replica.ErrValueTooLarge, limit)
	case err != nil:
		return nil, nil, fmt.Errorf("%w: read body: %v", replica.ErrInvalidArgument, err)
	}
	return b, nil, nil
}

// fail writes err's status with a one-line reason.
func (h *httpAPI) fail(w http.ResponseWriter, err error) {
	code := rpcerr.HTTPStatus(err)
	if code >= 500 && code != http.StatusGatewayTimeout && code != http.StatusServiceUnavailable {
		h.d.Logger.Warn("http request failed", "status", code, "err", err)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, err.Error())
}
