package server

import (
	"fmt"
	"net/url"

	"ringkv/node/replica"
)

// Entity is a /v0/entity (or KV RPC) request as given: the key and the quorum asked for
// (0 = the default). The Coordinator validates them, once per request.
type Entity struct {
	Key  []byte
	Ack  int
	From int
}

// ParseEntityQuery parses the query string of a /v0/entity request: one id, and ack and
// from each at most once as positive integers. The key's size and the quorum's bounds are
// the Coordinator's to check. Errors wrap replica.ErrInvalidArgument and read as one line.
func ParseEntityQuery(rawQuery string) (Entity, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return Entity{}, fmt.Errorf("%w: malformed query: %v", replica.ErrInvalidArgument, err)
	}
	ids, ok := q["id"]
	if !ok {
		return Entity{}, fmt.Errorf("%w: missing id", replica.ErrInvalidArgument)
	}
	if len(ids) != 1 {
		return Entity{}, fmt.Errorf("%w: id given %d times", replica.ErrInvalidArgument, len(ids))
	}
	for _, name := range []string{"ack", "from"} {
		if vs, ok := q[name]; ok && (len(vs) != 1 || vs[0] == "") {
			return Entity{}, fmt.Errorf("%w: %s must be one positive integer", replica.ErrInvalidArgument, name)
		}
	}
	a, f, err := replica.ParseQuorum(q.Get("ack"), q.Get("from"))
	if err != nil {
		return Entity{}, err
	}
	return Entity{Key: []byte(ids[0]), Ack: a, From: f}, nil
}
