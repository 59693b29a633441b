package replica

import (
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

var (
	// ErrInvalidArgument is returned for a bad request: an empty key, or
	// ack/from that are not positive integers, ack > from or from > replicas.
	// HTTP 400, gRPC InvalidArgument.
	ErrInvalidArgument = rpcerr.New(kvpb.Reason_REASON_INVALID_ARGUMENT, "invalid argument")
	// ErrNotEnoughReplicas is returned when fewer than ack replicas answered, as
	// soon as that becomes certain. HTTP 504, gRPC Unavailable.
	ErrNotEnoughReplicas = rpcerr.New(kvpb.Reason_REASON_NOT_ENOUGH_REPLICAS, "not enough replicas")
	// ErrKeyTooLarge is returned for a key over Config.MaxKeyBytes. HTTP 400.
	ErrKeyTooLarge = rpcerr.New(kvpb.Reason_REASON_KEY_TOO_LARGE, "key too large")
	// ErrValueTooLarge is returned for a value over Config.MaxValueBytes. HTTP 413.
	ErrValueTooLarge = rpcerr.New(kvpb.Reason_REASON_VALUE_TOO_LARGE, "value too large")
	// ErrNotAdmitted is returned while the node has no ring: it has not been
	// admitted to a cluster yet. HTTP 503.
	ErrNotAdmitted = rpcerr.New(kvpb.Reason_REASON_NOT_ADMITTED, "awaiting admission")
	// ErrReplicaUnavailable is returned by a replica that cannot be reached
	// (gRPC Unavailable and the like). It counts as a failure for the peer's
	// circuit breaker.
	ErrReplicaUnavailable = rpcerr.New(kvpb.Reason_REASON_REPLICA_UNAVAILABLE, "replica unavailable")
	// ErrBreakerOpen is the error recorded for a replica whose circuit breaker
	// is open: the call was not attempted.
	ErrBreakerOpen = rpcerr.New(kvpb.Reason_REASON_BREAKER_OPEN, "circuit breaker open")
	// ErrStaleView is a replica's refusal of a write routed by an older view
	// than its own: a ring change the sender has not applied yet (the write
	// did not also go to the change's pending replicas), or a ring in which
	// this node no longer replicates the key. The sender catches up and
	// retries. gRPC FailedPrecondition with the reason STALE_VIEW (other
	// FailedPrecondition refusals carry other reasons); a refusal, so it does
	// not count against the peer's breaker.
	ErrStaleView = rpcerr.New(kvpb.Reason_REASON_STALE_VIEW, "stale ring view")
	// ErrConnecting is a node's readiness while it is still making its first
	// connection to a peer of its ring (see Coordinator.Unreached). HTTP 503.
	ErrConnecting = rpcerr.New(kvpb.Reason_REASON_CONNECTING, "connecting to peers")
	// ErrRangeDamaged is a replica's refusal to answer a read of a key in a token range
	// its store marked damaged (started with --recover, not yet repaired from the peers):
	// its copy may miss acknowledged writes, so it must not count toward a read's R. The
	// coordinator asks another replica instead. gRPC FailedPrecondition with the
	// reason RANGE_DAMAGED; a refusal, so it does not count against the peer's breaker. Writes to the range are still applied.
	ErrRangeDamaged = rpcerr.New(kvpb.Reason_REASON_RANGE_DAMAGED, "range damaged, awaiting repair")
	// ErrClosed is returned by a Coordinator after Close.
	ErrClosed = rpcerr.New(kvpb.Reason_REASON_COORDINATOR_CLOSED, "coordinator closed")
)
