package replica

import (
	"fmt"
	"strconv"
)

// ParseQuorum validates the ack and from query parameters of a request against
// n, the replication factor capped by cluster size, and returns the effective
// values. An empty string means the default: from = n, ack = from/2+1.
// Anything else must be a positive decimal integer, with ack <= from <= n.
// Errors wrap ErrInvalidArgument and read as a one-line reason; n < 1 yields
// ErrNotAdmitted. Shared by the HTTP and gRPC front ends.
func ParseQuorum(ack, from string, n int) (int, int, error) {
	a, err := parsePositive("ack", ack)
	if err != nil {
		return 0, 0, err
	}
	f, err := parsePositive("from", from)
	if err != nil {
		return 0, 0, err
	}
	return Quorum(a, f, n)
}

// parsePositive parses a positive decimal integer; "" yields 0 (the default).
func parsePositive(name, s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("%w: %s=%q is not a positive integer", ErrInvalidArgument, name, s)
	}
	return v, nil
}

// Quorum is ParseQuorum for integers, as the gRPC API carries them: 0 means
// the default, negative values are invalid.
func Quorum(ack, from, n int) (int, int, error) {
	if n < 1 {
		return 0, 0, fmt.Errorf("quorum: %w", ErrNotAdmitted)
	}
	switch {
	case ack < 0:
		return 0, 0, fmt.Errorf("%w: ack=%d is not a positive integer", ErrInvalidArgument, ack)
	case from < 0:
		return 0, 0, fmt.Errorf("%w: from=%d is not a positive integer", ErrInvalidArgument, from)
	case from > n:
		return 0, 0, fmt.Errorf("%w: from=%d exceeds the %d replicas", ErrInvalidArgument, from, n)
	}
	if from == 0 {
		from = n
	}
	if ack == 0 {
		ack = from/2 + 1
	}
	if ack > from {
		return 0, 0, fmt.Errorf("%w: ack=%d exceeds from=%d", ErrInvalidArgument, ack, from)
	}
	return ack, from, nil
}
