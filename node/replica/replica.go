// Package replica is the replication coordinator of a ringkv node: it turns
// one client Get, Put or Delete into calls to the key's replicas, waits for
// ack of them, and resolves their answers last-write-wins.
//
// # Writes
//
// Put and Delete stamp a fresh hybrid-logical-clock timestamp (a Delete
// writes a tombstone) and send the record to every replica in parallel: the
// key's natural replicas, plus during a ring change the pending ones that
// are about to take it over; the write needs ack + len(pending) acks
// (Cassandra's rule). The coordinator answers as soon as enough replicas
// acknowledged, and with ErrNotEnoughReplicas as soon as too many failed;
// the other calls run on in the background up to the per-replica deadline.
//
// # Reads and hedging
//
// A read asks ack replicas first — this node itself when it is a replica,
// then peers with closed breakers and the lowest latency EWMA — and the
// others only when one of those fails or when none has answered within the
// hedge delay, the observed p99 of replica reads clamped to
// [HedgeMin, HedgeMax]. The answer is the newest version (store.Record.Newer)
// among the first ack replies. Replies that arrive later still count for
// read reconciliation: once every asked replica has answered or timed out, those
// that returned an older version or none get the newest one written back in
// the background, by a bounded pool of workers that Close stops.
//
// # Hinted handoff
//
// A write call to a peer that fails for want of reaching it (down, timed
// out, breaker open) leaves a hint: the record, kept durably for that peer
// (Config.Hints, the node's hints.Log; bounded by bytes and by age) and
// handed over once it answers again, so a node back from an outage gets the
// writes it missed without waiting for reads or a repair, even when the
// coordinator restarted meanwhile. Hints never count as acks. See hints.go.
//
// # Circuit breakers
//
// Every peer has a breaker. It opens on evidence of death: BreakerFailures
// consecutive failures the last of which was a refused or reset connection,
// or as many deadline misses spanning BreakerSlowSpell (a node that is slow
// because the machine is busy is not a dead node). A request skips a peer
// whose breaker is open only while its other replicas can still reach ack;
// when they cannot, the call goes out anyway, waking the connection and
// waiting for it within the deadline, and an early ErrNotEnoughReplicas
// names the replicas skipped and why. The breaker closes on any success, and
// without a client request: a goroutine per peer follows its gRPC connection
// (Transport), closing the breaker when the connection turns ready, and
// probes a peer whose breaker is open every ProbeInterval. The same goroutine
// starts the first connection at once; Unreached tells a starting node which
// peers are still being tried.
package replica

import (
	"context"
	"time"

	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

// Replica is one node's copy of the data as a coordinator sees it: this
// node's own store (Local) or a peer over gRPC (Remote). Safe for concurrent
// use. Calls honour ctx's deadline and cancellation.
type Replica interface {
	// Read returns the replica's version of key; found is false when it
	// holds none. A tombstone is returned with found true.
	Read(ctx context.Context, key []byte) (rec store.Record, found bool, err error)
	// Write stores rec unless the replica holds a version at least as new;
	// applied reports which. Either way the replica now holds rec or newer.
	// vid is the view the write was routed by; a replica with a newer view
	// that makes the routing wrong refuses with ErrStaleView.
	Write(ctx context.Context, key []byte, rec store.Record, vid ring.ViewID) (applied bool, err error)
}

// Observer receives the coordinator's metrics. Safe for concurrent use; it
// must not block. A nil Observer is a no-op.
type Observer interface {
	// ObserveOp is called once per client operation the coordinator
	// handled (role RoleCoordinator), d the time to the answer, err the
	// error returned (nil on success; a Get of an absent key is a success).
	ObserveOp(op Op, role Role, d time.Duration, err error)
	// Reconciled is called once per replica a read brought up to date (read reconciliation).
	Reconciled()
}

// KeyObserver is told of every client operation the coordinator answered, with its key: the
// on-call view's hot keys and heat history. Safe for concurrent use; it must not block nor keep
// key past the call. Operations refused as invalid (empty or oversized key or value, bad
// ack/from) are not reported.
type KeyObserver interface {
	// ObserveKey: op on key (ring token token) moved bytes bytes of value (written, or read
	// and found), answered after d with err (nil on success; a Get of an absent key is one).
	ObserveKey(op Op, key []byte, token uint64, bytes int, d time.Duration, err error)
}

// CallObserver is told what the coordinator sees of its peer replicas: latency per peer and
// per vnode, hedges, breaker trips (node/latency). Safe for concurrent use; it must not block.
// Calls to this node's own store and calls cut short by Close are not reported.
type CallObserver interface {
	// ObserveCall: one read (read true) or write call to peer for the key at token took d
	// and failed with err (nil on success, and for a refusal that shows the peer alive).
	ObserveCall(peer string, token uint64, read bool, d time.Duration, err error)
	// ObserveHedge: a read went to another replica because peer had not answered within
	// the hedge delay.
	ObserveHedge(peer string)
	// ObserveBreakerTrip: peer's circuit breaker opened.
	ObserveBreakerTrip(peer string)
}

// VnodeObserver counts the reads and writes a node's store serves, by ring
// token (so per vnode). Safe for concurrent use; it must not block. A nil
// VnodeObserver is a no-op.
type VnodeObserver interface {
	ObserveVnode(token uint64, write bool, bytes int)
}

// Op is a client operation, as metrics, logs and the Admin API name it.
type Op uint8

// The operations, in the order metrics index them.
const (
	OpGet Op = iota
	OpPut
	OpDelete
	NumOps = iota
)

var opNames = [NumOps]string{"get", "put", "delete"}

// String is the operation's name: get, put or delete.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "unknown"
}

// Proto is o on the wire.
func (o Op) Proto() kvpb.Op {
	switch o {
	case OpGet:
		return kvpb.Op_OP_GET
	case OpPut:
		return kvpb.Op_OP_PUT
	case OpDelete:
		return kvpb.Op_OP_DELETE
	}
	return kvpb.Op_OP_UNSPECIFIED
}

// Role is the part a node plays in an operation: it coordinates it for a
// client, or serves it as one of the key's replicas.
type Role uint8

// The roles, in the order metrics index them.
const (
	RoleCoordinator Role = iota
	RoleReplica
	NumRoles = iota
)

var roleNames = [NumRoles]string{"coordinator", "replica"}

// String is the role's name: coordinator or replica.
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "unknown"
}

// Proto is r on the wire.
func (r Role) Proto() kvpb.OpRole {
	switch r {
	case RoleCoordinator:
		return kvpb.OpRole_OP_ROLE_COORDINATOR
	case RoleReplica:
		return kvpb.OpRole_OP_ROLE_REPLICA
	}
	return kvpb.OpRole_OP_ROLE_UNSPECIFIED
}
