package server

import (
	"fmt"
	"net/url"

	"ringkv/node/replica"
)

// MaxKeySize is the longest key the APIs accept, in bytes.
const MaxKeySize = 1024

// Entity is a validated /v0/entity (or KV RPC) request: the key and the quorum to use.
type Entity struct {
	Key  []byte
	Ack  int
	From int
}

// ParseEntityQuery validates the query string of a /v0/entity request against a cluster
// of replication factor replicas (already capped by cluster size). Errors wrap
// replica.ErrInvalidArgument or replica.ErrKeyTooLarge and read as one line.
func ParseEntityQuery(rawQuery string, replicas int) (Entity, error) {
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
	return parseEntity([]byte(ids[0]), q.Get("ack"), q.Get("from"), replicas)
}

// parseEntity validates a key and ack/from as given ("" = default).
func parseEntity(key []byte, ack, from string, replicas int) (Entity, error) {
	if len(key) == 0 {
		return Entity{}, fmt.Errorf("%w: empty id", replica.ErrInvalidArgument)
	}
	if len(key) > MaxKeySize {
		return Entity{}, errKeyTooLarge(len(key))
	}
	a, f, err := replica.ParseQuorum(ack, from, replicas)
	if err != nil {
		return Entity{}, err
	}
	return Entity{Key: key, Ack: a, From: f}, nil
}
