package node_test

import (
	"ringkv/node/ring"
	"ringkv/node/store"
)

func storeKeyOf(key []byte) []byte { return store.StoreKey(ring.Token(key), key) }
