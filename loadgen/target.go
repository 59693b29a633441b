package loadgen

import (
	"context"
	"sync/atomic"
	"time"
)

// Kind is the outcome of one request: KindOK, KindNotFound (a normal answer of a GET on an
// absent key, counted apart but not as an error), or one kind of error.
type Kind string

// Outcomes of a request.
const (
	KindOK       Kind = ""
	KindNotFound Kind = "not_found"
	// KindTimeout: the request ran out of Config.Timeout on the client.
	KindTimeout Kind = "timeout"
	// KindUnavailable: the node answered 504/503 (gRPC Unavailable or DeadlineExceeded):
	// fewer than ack replicas answered.
	KindUnavailable Kind = "unavailable"
	// KindClient: a 4xx answer other than 404 (gRPC InvalidArgument and friends).
	KindClient Kind = "4xx"
	// KindConnection: the connection failed (refused, reset, closed).
	KindConnection Kind = "connection"
	// KindOther: anything else (5xx, Internal, ...).
	KindOther Kind = "other"
	// kindCanceled: the run ended while the request was in flight; not counted.
	kindCanceled Kind = "canceled"
)

// IsError tells whether k counts as an error.
func (k Kind) IsError() bool { return k != KindOK && k != KindNotFound && k != kindCanceled }

// ErrorKinds returns the error kinds in report order.
func ErrorKinds() []Kind {
	return []Kind{KindTimeout, KindUnavailable, KindClient, KindConnection, KindOther}
}

// Target is the system under load.
//
// Concurrency: Run calls the methods from Config.Connections worker goroutines at once; worker w
// passes conn = w on every call and never has two calls in flight, so an implementation may pin
// one connection to each conn index without locking. value is only valid during the call. The
// ctx carries the per-request timeout; a method returns when ctx ends. Run never closes a Target.
type Target interface {
	Get(ctx context.Context, conn int, key string) Kind
	Put(ctx context.Context, conn int, key string, value []byte) Kind
	Delete(ctx context.Context, conn int, key string) Kind
}

// deadlineTarget is a Target that enforces a request's deadline itself, which saves Run a
// context (a timer and a cancel registration) per request. ctx is the run's context, the same
// for every request of a run: when it ends, a request in flight returns.
type deadlineTarget interface {
	request(ctx context.Context, conn int, op Op, key string, value []byte, deadline time.Time) Kind
}

// loopTarget is a Target that runs Run's closed loop itself, on event loops (HTTPTarget on
// Linux: evloop_linux.go). runClosedLoops sends requests until end (or cfg.Requests) with the
// workers' choices of keys and records every answer through them; it reports false, having
// sent nothing, when it cannot, and Run then runs a goroutine per worker.
type loopTarget interface {
	runClosedLoops(ctx context.Context, workers []*worker, next *atomic.Int64, measureFrom, end time.Time) bool
}
