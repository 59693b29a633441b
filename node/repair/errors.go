package repair

import (
	"errors"

	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

var (
	// ErrTreeMismatch: two trees of different ranges or depths were compared.
	ErrTreeMismatch = rpcerr.New(kvpb.Reason_REASON_TREE_MISMATCH, "trees of different shapes")
	// ErrRefused: a repair plan has refusals (a ring change in flight, a replica that does
	// not answer); nothing was started.
	ErrRefused = rpcerr.New(kvpb.Reason_REASON_REPAIR_REFUSED, "repair refused")
	// ErrRunning: this node already coordinates a repair session (one at a time).
	ErrRunning = rpcerr.New(kvpb.Reason_REASON_REPAIR_RUNNING, "a repair is already running on this node")
	// ErrNoRepair: no repair session is running (AbortRepair).
	ErrNoRepair = rpcerr.New(kvpb.Reason_REASON_NO_REPAIR, "no repair running")
	// ErrInvalidArgument: a malformed repair request (a vnode that is not in the ring, an
	// unknown node).
	ErrInvalidArgument = rpcerr.New(kvpb.Reason_REASON_INVALID_REPAIR, "invalid repair request")
	// ErrTreeGone: a replica no longer keeps the tree a descent asked about (it expired,
	// or the node restarted); the range is compared again by the next repair.
	ErrTreeGone = rpcerr.New(kvpb.Reason_REASON_TREE_GONE, "tree no longer kept")
	// ErrRingChanged: a ring change began while the session ran; the session stops.
	ErrRingChanged = errors.New("ring change started")
)
