package store

import "encoding/binary"

// tokenLen is the size of the ring-token prefix of a store key.
const tokenLen = 8

// StoreKey returns the badger key for a user key: the 8-byte big-endian ring
// token followed by the key, so keys sort by token, then by key, and every
// token range is one contiguous key range.
func StoreKey(token uint64, key []byte) []byte {
	sk := make([]byte, tokenLen, tokenLen+len(key))
	binary.BigEndian.PutUint64(sk, token)
	return append(sk, key...)
}

// appendStoreKey appends StoreKey(token, key) to b.
func appendStoreKey(b []byte, token uint64, key []byte) []byte {
	return append(binary.BigEndian.AppendUint64(b, token), key...)
}

// SplitStoreKey splits a store key into its token and user key; the key
// aliases sk. A store key shorter than a token yields (0, nil).
func SplitStoreKey(sk []byte) (token uint64, key []byte) {
	if len(sk) < tokenLen {
		return 0, nil
	}
	return binary.BigEndian.Uint64(sk), sk[tokenLen:]
}

// tokenKey is the smallest store key with the given token.
func tokenKey(token uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, tokenLen), token)
}

// span is an inclusive token interval [lo, hi].
type span struct{ lo, hi uint64 }

func (s span) contains(t uint64) bool { return s.lo <= t && t <= s.hi }

// spans splits the ring range (start, end] into inclusive token intervals in
// ring order, clockwise from start. start >= end wraps past the top of the
// token space; start == end is the whole ring.
func spans(start, end uint64) []span {
	if start < end {
		return []span{{start + 1, end}}
	}
	if start == ^uint64(0) {
		return []span{{0, end}}
	}
	return []span{{start + 1, ^uint64(0)}, {0, end}}
}
