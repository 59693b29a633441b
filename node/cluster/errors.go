package cluster

import "errors"

// Sentinel errors of node/cluster. They survive forwarding to the raft leader: the Cluster
// service sends their reason in the status details and the caller gets the same sentinel back.
var (
	// ErrChangeInFlight: a ring change is already in flight; abort or finish it first.
	ErrChangeInFlight = errors.New("a ring change is already in flight")
	// ErrNoChange: no ring change is in flight (or not the one named).
	ErrNoChange = errors.New("no ring change in flight")
	// ErrUnsafe: the change would leave the cluster unable to hold N replicas; force overrides.
	ErrUnsafe = errors.New("unsafe ring change")
	// ErrMemberExists: an added node's id or address is already a member.
	ErrMemberExists = errors.New("member already in the ring")
	// ErrUnknownMember: the named node is not a member.
	ErrUnknownMember = errors.New("unknown member")
	// ErrNoRing: the cluster has no ring yet (a node awaiting admission, or founders that have
	// not elected a leader).
	ErrNoRing = errors.New("no ring yet")
	// ErrNoLeader: no raft leader is known (this node is cut off from the majority).
	ErrNoLeader = errors.New("no raft leader")
	// ErrNotLeader: a leader-only call reached a follower (forwarding lost a race with an election).
	ErrNotLeader = errors.New("not the raft leader")
	// ErrInvalidArgument: a malformed request.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrClosed: the cluster was closed.
	ErrClosed = errors.New("cluster closed")

	errShutdown = errors.New("raft transport shut down")
)
