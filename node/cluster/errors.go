package cluster

import (
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// Sentinel errors of node/cluster. They survive forwarding to the raft leader: the Cluster
// service sends their reason in the status details and the caller gets the same sentinel back.
var (
	// ErrChangeInFlight: a ring change is already in flight; abort or finish it first.
	ErrChangeInFlight = rpcerr.New(kvpb.Reason_REASON_CHANGE_IN_FLIGHT, "a ring change is already in flight")
	// ErrNoChange: no ring change is in flight (or not the one named).
	ErrNoChange = rpcerr.New(kvpb.Reason_REASON_NO_CHANGE, "no ring change in flight")
	// ErrUnsafe: the change would leave the cluster unable to hold N replicas; force overrides.
	ErrUnsafe = rpcerr.New(kvpb.Reason_REASON_UNSAFE, "unsafe ring change")
	// ErrMemberExists: an added node's id or address is already a member.
	ErrMemberExists = rpcerr.New(kvpb.Reason_REASON_MEMBER_EXISTS, "member already in the ring")
	// ErrUnknownMember: the named node is not a member.
	ErrUnknownMember = rpcerr.New(kvpb.Reason_REASON_UNKNOWN_MEMBER, "unknown member")
	// ErrNoRing: the cluster has no ring yet (a node awaiting admission, or founders that have
	// not elected a leader).
	ErrNoRing = rpcerr.New(kvpb.Reason_REASON_NO_RING, "no ring yet")
	// ErrNoLeader: no raft leader is known (this node is cut off from the majority).
	ErrNoLeader = rpcerr.New(kvpb.Reason_REASON_NO_LEADER, "no raft leader")
	// ErrNotLeader: a leader-only call reached a follower (forwarding lost a race with an election).
	ErrNotLeader = rpcerr.New(kvpb.Reason_REASON_NOT_LEADER, "not the raft leader")
	// ErrInvalidArgument: a malformed request.
	ErrInvalidArgument = rpcerr.New(kvpb.Reason_REASON_INVALID_CHANGE, "invalid argument")
	// ErrNothingToPause: a pause with no range streaming (no change in flight, or every
	// range of it has arrived).
	ErrNothingToPause = rpcerr.New(kvpb.Reason_REASON_NOTHING_TO_PAUSE, "nothing to pause: no ring change is streaming")
	// ErrAlreadyPaused: a pause of a change that is paused already.
	ErrAlreadyPaused = rpcerr.New(kvpb.Reason_REASON_ALREADY_PAUSED, "the ring change is paused already")
	// ErrNotPaused: a resume with no paused change.
	ErrNotPaused = rpcerr.New(kvpb.Reason_REASON_NOT_PAUSED, "no ring change is paused")
	// ErrClosed: the cluster was closed.
	ErrClosed = rpcerr.New(kvpb.Reason_REASON_CLUSTER_CLOSED, "cluster closed")

	errShutdown = rpcerr.New(kvpb.Reason_REASON_RAFT_SHUTDOWN, "raft transport shut down")
)

// Sentinel errors of the repair journal.
var (
	// ErrNotCoordinator: a repair session's step came from a node that no longer
	// coordinates it (another node took it over), or the session is over.
	ErrNotCoordinator = rpcerr.New(kvpb.Reason_REASON_NOT_COORDINATOR, "not the session's coordinator")
	// ErrNoRepairToPause, ErrRepairAlreadyPaused, ErrRepairNotPaused: repair's refusals of
	// pause and resume, with the ring change's reasons.
	ErrNoRepairToPause     = rpcerr.New(kvpb.Reason_REASON_NOTHING_TO_PAUSE, "nothing to pause: no repair is in flight")
	ErrRepairAlreadyPaused = rpcerr.New(kvpb.Reason_REASON_ALREADY_PAUSED, "repair is paused already")
	ErrRepairNotPaused     = rpcerr.New(kvpb.Reason_REASON_NOT_PAUSED, "repair is not paused")
	// ErrRepairRunning: the node already coordinates a session in flight.
	ErrRepairRunning = rpcerr.New(kvpb.Reason_REASON_REPAIR_RUNNING, "a repair is already running on this node")
	// ErrRepairPaused: a session cannot start while repair is paused.
	ErrRepairPaused = rpcerr.New(kvpb.Reason_REASON_REPAIR_REFUSED, "repair is paused")
)
