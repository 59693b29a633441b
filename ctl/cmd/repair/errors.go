package repair

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/ctl/cli"
)

var (
	// ErrUnimplemented: the node answers Unimplemented to the repair RPCs (a kvnode older
	// than repair).
	ErrUnimplemented = errors.New("repair is not implemented")
	// errInterrupted: the operator stopped watching (Ctrl-C); the repair goes on.
	errInterrupted = errors.New("stopped watching")
	// errNoRepair: abort found no repair in flight on any member.
	errNoRepair = errors.New("no repair in flight")
)

// rpcError is cli.RPCError, except that Unimplemented (a node from before repair) reads as
// what it means.
func rpcError(addr string, err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("node %s: %w: its kvnode predates repair; upgrade it (kvctl status shows each node's version)", addr, ErrUnimplemented)
	}
	return cli.RPCError(addr, err)
}
