package replica

import (
	"fmt"
	"strconv"
)

// ParseQuorum parses the ack and from query parameters of an HTTP request:
// "" is 0 (the default), anything else must be a positive decimal integer.
// It checks their form only; Quorum, run once per request by the
// Coordinator, applies the defaults and ack <= from <= replicas. Errors wrap
// ErrInvalidArgument and read as a one-line reason.
func ParseQuorum(ack, from string) (int, int, error) {
	a, err := parsePositive("ack", ack)
	if err != nil {
		return 0, 0, err
	}
	f, err := parsePositive("from", from)
	if err != nil {
		return 0, 0, err
	}
	return a, f, nil
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

// Quorum resolves a request's ack and from against n, the replication factor
// capped by cluster size, and returns the effective values: 0 means the
// default (from = n, ack = from/2+1), negative values are invalid, and
// ack <= from <= n. Errors wrap ErrInvalidArgument and read as a one-line
// reason; n < 1 yields ErrNotAdmitted. The Coordinator checks it once per
// request; the front ends pass ack and from on as given.
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
