package store

// DefaultStampBytes is the stamp cache's default budget (Config.StampBytes): room for about
// half a million short keys.
const DefaultStampBytes = 32 << 20

// stampOverhead is what one remembered key costs beside its bytes: the map slot, the
// string header and the stamp, roughly.
const stampOverhead = 48

// stamp is what last-write-wins needs of a key's newest record to decide most writes: its
// timestamp and whether it is a tombstone.
type stamp struct {
	ts   uint64
	tomb bool
}

// stamps remembers the stamp of the newest record of recently written keys, so that a
// write's last-write-wins comparison (Store.newer) needs no badger read when its key is
// remembered. A badger read is not cheap: it looks in every memtable and every level for the
// newest version, so on a busy replica it was a third of the CPU of a write.
//
// Each stripe's map is guarded by that stripe's lock (Store.locks), which every writer of a
// key holds; so an entry is the key's stored stamp whenever a writer reads it. Writers keep
// it so: commit records every record it sets and forgets the keys of a transaction that
// failed, a purge and DeleteRange forget the keys they delete, and reopen forgets all. A key
// not remembered is read from badger, as before. Each stripe holds up to its share of the
// budget and drops an arbitrary entry (Go's map order) for a new one when full.
type stamps struct {
	budget int // bytes per stripe; 0: off
	shards [stripes]stampShard
}

type stampShard struct {
	m     map[string]stamp
	bytes int
}

func (c *stamps) init(total int64) {
	if total <= 0 {
		c.budget = 0
		return
	}
	c.budget = int(max(total/stripes, 1))
	for i := range c.shards {
		c.shards[i] = stampShard{}
	}
}

// get returns sk's stamp if remembered; the caller holds stripe's lock.
func (c *stamps) get(stripe uint32, sk []byte) (stamp, bool) {
	if c.budget == 0 {
		return stamp{}, false
	}
	st, ok := c.shards[stripe].m[string(sk)]
	return st, ok
}

// put remembers st as sk's stamp; the caller holds stripe's lock.
func (c *stamps) put(stripe uint32, sk []byte, st stamp) {
	if c.budget == 0 {
		return
	}
	sh := &c.shards[stripe]
	if sh.m == nil {
		sh.m = make(map[string]stamp)
	}
	if _, ok := sh.m[string(sk)]; ok {
		sh.m[string(sk)] = st
		return
	}
	cost := len(sk) + stampOverhead
	if cost > c.budget {
		return
	}
	for k := range sh.m {
		if sh.bytes+cost <= c.budget {
			break
		}
		delete(sh.m, k)
		sh.bytes -= len(k) + stampOverhead
	}
	sh.m[string(sk)] = st
	sh.bytes += cost
}

// drop forgets sk; the caller holds stripe's lock.
func (c *stamps) drop(stripe uint32, sk []byte) {
	if c.budget == 0 {
		return
	}
	sh := &c.shards[stripe]
	if _, ok := sh.m[string(sk)]; ok {
		delete(sh.m, string(sk))
		sh.bytes -= len(sk) + stampOverhead
	}
}
