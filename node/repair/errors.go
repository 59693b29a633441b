package repair

import "errors"

var (
	// ErrTreeMismatch: two trees of different ranges or depths were compared.
	ErrTreeMismatch = errors.New("trees of different shapes")
	// ErrRefused: a repair plan has refusals (a ring change in flight, a replica that does
	// not answer); nothing was started.
	ErrRefused = errors.New("repair refused")
	// ErrRunning: this node already coordinates a repair session (one at a time).
	ErrRunning = errors.New("a repair is already running on this node")
	// ErrNoRepair: no repair session is running (AbortRepair).
	ErrNoRepair = errors.New("no repair running")
	// ErrInvalidArgument: a malformed repair request (a vnode that is not in the ring, an
	// unknown node).
	ErrInvalidArgument = errors.New("invalid repair request")
	// ErrTreeGone: a replica no longer keeps the tree a descent asked about (it expired,
	// or the node restarted); the range is compared again by the next repair.
	ErrTreeGone = errors.New("tree no longer kept")
	// ErrRingChanged: a ring change began while the session ran; the session stops.
	ErrRingChanged = errors.New("ring change started")
)
