package ring

import "errors"

// Sentinel errors returned by this package; wrapped with context, test with errors.Is.
var (
	// ErrNoMembers: a ring needs at least one member.
	ErrNoMembers = errors.New("ring has no members")
	// ErrInvalidMember: a member has an empty ID, an unknown State, a negative Weight or no tokens.
	ErrInvalidMember = errors.New("invalid member")
	// ErrDuplicateMember: two members share an ID, or WithMember was given an existing ID.
	ErrDuplicateMember = errors.New("duplicate member")
	// ErrDuplicateToken: a token is held twice (by one member or by two).
	ErrDuplicateToken = errors.New("duplicate token")
	// ErrInvalidReplicas: the replication factor is below 1.
	ErrInvalidReplicas = errors.New("invalid replication factor")
	// ErrInvalidVnodes: a vnode count is below 1.
	ErrInvalidVnodes = errors.New("invalid vnode count")
	// ErrUnknownMember: no member has this ID.
	ErrUnknownMember = errors.New("unknown member")
	// ErrLastMember: removing the member would leave the ring empty.
	ErrLastMember = errors.New("cannot remove the last member")
	// ErrRingFull: the token space has no range left that can be split.
	ErrRingFull = errors.New("no token range left to split")
)
