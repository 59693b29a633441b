package server

import (
	"fmt"

	"ringkv/node/replica"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// Sentinels of the servers. Errors become gRPC and HTTP statuses through proto/rpcerr
// (rpcerr.Encode, rpcerr.HTTPStatus), the one table of the node, kvctl and the console.
var (
	// ErrNotFound: the key is absent or its newest version is a tombstone.
	ErrNotFound = rpcerr.New(kvpb.Reason_REASON_NOT_FOUND, "not found")
	// ErrUnknownPath: an HTTP path outside the v0 API (400, as the course's servers answer).
	ErrUnknownPath = rpcerr.New(kvpb.Reason_REASON_UNKNOWN_PATH, "unknown path")
	// ErrMethodNotAllowed: an HTTP method the path does not serve.
	ErrMethodNotAllowed = rpcerr.New(kvpb.Reason_REASON_METHOD_NOT_ALLOWED, "method not allowed")
	// ErrUnimplemented: an RPC this node was built without (its dependency is nil).
	ErrUnimplemented = rpcerr.New(kvpb.Reason_REASON_UNIMPLEMENTED, "unimplemented")
	// ErrShuttingDown ends the streams of a node that drains or stops its servers.
	ErrShuttingDown = rpcerr.New(kvpb.Reason_REASON_SHUTTING_DOWN, "node is shutting down")
)

var errEmptyKey = fmt.Errorf("%w: empty key", replica.ErrInvalidArgument)
