package server

import (
	"fmt"
	"net/url"
	"strings"

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
	// url.ParseQuery's rules (a semicolon is an error, a pair without "=" has an empty
	// value, an empty pair is skipped) without its map: this runs once per request.
	var id, ack, from string
	var nid, nack, nfrom int
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if strings.Contains(pair, ";") {
			return Entity{}, fmt.Errorf("%w: malformed query: invalid semicolon separator in query", replica.ErrInvalidArgument)
		}
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, err := queryUnescape(k)
		if err == nil {
			v, err = queryUnescape(v)
		}
		if err != nil {
			return Entity{}, fmt.Errorf("%w: malformed query: %v", replica.ErrInvalidArgument, err)
		}
		switch k {
		case "id":
			id, nid = v, nid+1
		case "ack":
			ack, nack = v, nack+1
		case "from":
			from, nfrom = v, nfrom+1
		}
	}
	switch {
	case nid == 0:
		return Entity{}, fmt.Errorf("%w: missing id", replica.ErrInvalidArgument)
	case nid != 1:
		return Entity{}, fmt.Errorf("%w: id given %d times", replica.ErrInvalidArgument, nid)
	case nack > 1 || (nack == 1 && ack == ""):
		return Entity{}, fmt.Errorf("%w: ack must be one positive integer", replica.ErrInvalidArgument)
	case nfrom > 1 || (nfrom == 1 && from == ""):
		return Entity{}, fmt.Errorf("%w: from must be one positive integer", replica.ErrInvalidArgument)
	}
	a, f, err := replica.ParseQuorum(ack, from)
	if err != nil {
		return Entity{}, err
	}
	return Entity{Key: []byte(id), Ack: a, From: f}, nil
}

// queryUnescape is url.QueryUnescape, without its work for the common string that has
// nothing to unescape.
func queryUnescape(s string) (string, error) {
	if strings.ContainsAny(s, "%+") {
		return url.QueryUnescape(s)
	}
	return s, nil
}
