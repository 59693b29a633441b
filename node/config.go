// Package node assembles one ringkv node: its badger store, the ring it routes by, the
// replication coordinator, and the gRPC, HTTP and admin servers, with the process
// lifecycle around them (flags, signals, graceful drain).
package node

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ringkv/node/store"
)

// Peer is one founding member from --peers.
type Peer struct {
	ID   string
	Addr string
}

// Config holds every kvnode flag. Build it with DefaultConfig and check it with Validate.
type Config struct {
	// ID is the node's name, unique in the cluster. Empty: the --peers entry whose address
	// is Advertise (else GRPCAddr), else hostname-<grpc port>.
	ID string
	// DataDir is the badger directory. Empty: ./data/<id>.
	DataDir string
	// InMemory keeps the data in memory (a throwaway node).
	InMemory bool
	// HTTPAddr, GRPCAddr and AdminAddr are the listen addresses (port 0 = any free port).
	HTTPAddr  string
	GRPCAddr  string
	AdminAddr string
	// Advertise is the gRPC address other nodes and clients reach this node at, when it
	// differs from GRPCAddr (a node binding 0.0.0.0 in a container). Empty: GRPCAddr.
	Advertise string
	// CertsDir holds ca.crt, node.crt and node.key: mutual TLS on gRPC (clients, peers,
	// raft, admin), HTTPS on the client HTTP API and the admin port. Empty: plaintext.
	CertsDir string
	// Peers are the founders, this node included; empty = await admission (kvctl ring add).
	Peers []Peer
	// Replicas is the replication factor N (capped by cluster size).
	Replicas int
	// VNodes is the number of tokens per node.
	VNodes int
	// SyncWrites fsyncs every write before acknowledging it (badger SyncWrites).
	SyncWrites bool
	// StampCache bounds the memory that remembers recently written keys' newest timestamps,
	// so that a write's last-write-wins check needs no badger read (0 = off).
	StampCache int64
	// ValueThreshold is the record size from which the store keeps a record in badger's
	// value log rather than its LSM tree (store.Config.ValueThreshold).
	ValueThreshold int64
	// ClusterSecretFile holds the cluster secret required on internal and admin RPCs.
	ClusterSecretFile string
	// ReplicaTimeout bounds each call to a replica.
	ReplicaTimeout time.Duration
	// MaxClockOffset bounds how far a timestamp from a coordinator may be ahead of this
	// node's clock, and how far this node's clock may be off most of its peers before it
	// refuses to coordinate writes (CockroachDB's --max-offset); 0 = unbounded.
	MaxClockOffset time.Duration
	// MaxValueSize is the largest value accepted, in bytes.
	MaxValueSize int64
	// DrainTimeout bounds the graceful drain at shutdown before connections are cut.
	DrainTimeout time.Duration
	// ChangeRate is the default streaming throttle of a ring change per receiver, in bytes
	// per second (0 = unthrottled); a change's request may name its own.
	ChangeRate uint64
	// Raft timing of the metadata group; zero = hashicorp/raft's defaults (1s). Tests and
	// demos use shorter ones.
	RaftHeartbeatTimeout time.Duration
	RaftElectionTimeout  time.Duration
	// RaftReconcileInterval is how often the raft leader retries its duties; 0 = 1s.
	RaftReconcileInterval time.Duration
	// MoveRetryInterval is the pause before a failed range pull is retried; 0 = 1s.
	MoveRetryInterval time.Duration
	// MoveCheckpointBytes and MoveCheckpointInterval: a range move this node receives saves
	// its resume point (durably, in the data directory) once either much was pulled since the
	// last one, so a restart pulls at most that again; 0 = 64 MiB and 10 s.
	MoveCheckpointBytes    uint64
	MoveCheckpointInterval time.Duration
	// MoveStallAfter is how long a range move this node receives goes without progress
	// before it is reported stalled, with its cause (kvctl ring status, /readyz, the
	// ringkv_ring_change_moves_stalled gauge); 0 = never.
	MoveStallAfter time.Duration
	// MoveLatencyTarget paces the ranges this node pulls and serves in a ring change by its
	// own latency (stream.Adaptive: slow start, then AIMD, one decision per half second):
	// while the p99 of its client-facing and replica requests stays at or under the target
	// (and its goroutines' wait to run under half of it) the pace grows, above it the pace
	// halves (stream.RangeClient.Latency as the receiver, server.ReplicaDeps.Latency as a
	// source), never above the change's rate. 0 (the default) = 1.5 times the p99 before the
	// streams began; MovePaceOff = the change's rate alone.
	MoveLatencyTarget time.Duration

	// Fault limits.
	// MaxConnections bounds the open connections of each of the HTTP and gRPC ports; at the
	// limit an idle HTTP connection is closed to make room, else the new one is refused.
	// 0 = min(4096, a quarter of the open-file limit).
	MaxConnections int
	// HTTPReadTimeout bounds reading one HTTP request, header and body; IdleTimeout bounds an
	// idle keep-alive HTTP connection.
	HTTPReadTimeout time.Duration
	IdleTimeout     time.Duration
	// MinFreeDisk is the free space kept on the data volume: below it writes and replica
	// applies are refused (HTTP 507), reads go on, and writes resume once space is back.
	// The default (store.DefaultReserve) fits the volume: 5%, between 4 MiB and 1 GiB.
	MinFreeDisk store.Reserve
	// Hinted handoff: MaxHintBytes bounds the hints kept on disk for peers that
	// missed writes (the oldest of the peer with the most go first); MaxHintWindow drops hints
	// older than it (Cassandra's max_hint_window); both are counted, and repair covers them.
	// HintRate paces their handoff, bytes per second (0 = unpaced).
	MaxHintBytes  int64
	MaxHintWindow time.Duration
	HintRate      uint64
	// Recover starts a node whose data is damaged (else it refuses to start): it serves
	// what is left and says so in kvctl status until repaired.
	Recover bool

	// Repair (anti-entropy).
	// RepairInterval is how often the node repairs the ranges it is the primary replica of
	// (±10% jitter; 0 = no background repair). A round is skipped while a ring change is in
	// flight or another repair runs on the node.
	RepairInterval time.Duration
	// RepairRate paces background repair: bytes per second that each replica walks into
	// trees and pulls (0 = unthrottled). kvctl repair's default is ChangeRate.
	RepairRate uint64
	// RepairTakeoverAfter is how long the coordinator of a repair session in flight must fail
	// to answer before the raft leader takes the session over and continues it.
	RepairTakeoverAfter time.Duration
	// PredictionDelay after a ring change commits, the leader observes each node's load for
	// PredictionWindow and journals it beside the plan's prediction (0 window: not observed).
	PredictionDelay, PredictionWindow time.Duration
	// LoadWindow is the time constant of the per-vnode load the rebalance planner measures
	// (metrics.Config.LoadWindow); 0 = its default, a minute. Tests only.
	LoadWindow time.Duration
	// TombstoneGrace is how long a tombstone is kept at least: it is purged only once older
	// than this AND a completed repair of its range began after it was written. 0 = never purge.
	TombstoneGrace time.Duration
	// HotKeysOff stops keeping the hot keys summary (Admin HotKeys then answers that it is
	// not kept). Only to measure what the summary costs a request.
	HotKeysOff bool
	// Now is the wall clock of the repair's purge decisions and of the on-call view's time
	// slices (hot keys, heat history); nil = time.Now. Tests only.
	Now func() time.Time
}

// DefaultConfig returns SPEC.md's defaults.
func DefaultConfig() Config {
	return Config{
		HTTPAddr:       "127.0.0.1:8080",
		GRPCAddr:       "127.0.0.1:9090",
		AdminAddr:      "127.0.0.1:7070",
		Replicas:       3,
		VNodes:         64,
		ReplicaTimeout: time.Second,
		MaxClockOffset: 500 * time.Millisecond,
		MaxValueSize:   1 << 20,
		StampCache:     store.DefaultStampBytes,
		ValueThreshold: store.DefaultValueThreshold,
		DrainTimeout:   10 * time.Second,
		ChangeRate:     64 << 20,
		MoveStallAfter: time.Minute,
		// Fault limits.
		HTTPReadTimeout: 30 * time.Second,
		IdleTimeout:     2 * time.Minute,
		MinFreeDisk:     store.DefaultReserve,
		// Hinted handoff.
		MaxHintBytes:  256 << 20,
		MaxHintWindow: 3 * time.Hour,
		HintRate:      4 << 20,
		// Repair (anti-entropy).
		RepairInterval:      time.Hour,
		RepairRate:          4 << 20,
		RepairTakeoverAfter: 30 * time.Second,
		TombstoneGrace:      10 * 24 * time.Hour,
		// Predicted vs observed load of ring changes.
		PredictionDelay:  time.Minute,
		PredictionWindow: time.Minute,
	}
}

// Validate reports the first problem with c, naming the flag; errors wrap ErrInvalidConfig.
func (c Config) Validate() error {
	_, err := c.complete()
	return err
}

// complete returns c with its derived defaults (ID, DataDir) filled in, and Validate's error.
func (c Config) complete() (Config, error) {
	if c.ID == "" {
		c.ID = c.defaultID()
	}
	switch {
	case strings.ContainsAny(c.ID, "=, \t"):
		return c, fmt.Errorf("%w: --id %q: must not contain '=', ',' or spaces", ErrInvalidConfig, c.ID)
	case c.Replicas < 1:
		return c, fmt.Errorf("%w: --replicas %d: must be at least 1", ErrInvalidConfig, c.Replicas)
	case c.VNodes < 1 || c.VNodes > 4096:
		return c, fmt.Errorf("%w: --vnodes %d: must be between 1 and 4096", ErrInvalidConfig, c.VNodes)
	case c.ReplicaTimeout <= 0:
		return c, fmt.Errorf("%w: --replica-timeout %v: must be positive", ErrInvalidConfig, c.ReplicaTimeout)
	case c.MaxClockOffset < 0:
		return c, fmt.Errorf("%w: --max-clock-offset %v: must not be negative", ErrInvalidConfig, c.MaxClockOffset)
	case c.MoveStallAfter < 0:
		return c, fmt.Errorf("%w: --move-stall-after %v: must not be negative (0 = never)", ErrInvalidConfig, c.MoveStallAfter)
	case c.MoveCheckpointInterval < 0:
		return c, fmt.Errorf("%w: --move-checkpoint-interval %v: must not be negative (0 = 10s)", ErrInvalidConfig, c.MoveCheckpointInterval)
	case c.MoveLatencyTarget < 0 && c.MoveLatencyTarget != MovePaceOff:
		return c, fmt.Errorf("%w: --move-latency-target %v: must not be negative", ErrInvalidConfig, c.MoveLatencyTarget)
	case c.RaftHeartbeatTimeout < 0 || c.RaftElectionTimeout < 0:
		return c, fmt.Errorf("%w: --raft-heartbeat-timeout/--raft-election-timeout: must not be negative", ErrInvalidConfig)
	case c.MaxValueSize < 0:
		return c, fmt.Errorf("%w: --max-value-size %d: must not be negative", ErrInvalidConfig, c.MaxValueSize)
	case c.StampCache < 0:
		return c, fmt.Errorf("%w: --stamp-cache %d: must not be negative (0 = off)", ErrInvalidConfig, c.StampCache)
	case c.ValueThreshold < 1 || c.ValueThreshold > 1<<20:
		return c, fmt.Errorf("%w: --value-threshold %d: must be from 1 to 1M", ErrInvalidConfig, c.ValueThreshold)
	case c.MaxConnections < 0:
		return c, fmt.Errorf("%w: --max-connections %d: must not be negative", ErrInvalidConfig, c.MaxConnections)
	case c.HTTPReadTimeout <= 0 || c.IdleTimeout <= 0:
		return c, fmt.Errorf("%w: --http-read-timeout/--idle-timeout: must be positive", ErrInvalidConfig)
	case c.MaxHintBytes < 0:
		return c, fmt.Errorf("%w: --max-hint-bytes %d: must not be negative", ErrInvalidConfig, c.MaxHintBytes)
	case c.MaxHintWindow < 0:
		return c, fmt.Errorf("%w: --max-hint-window %v: must not be negative", ErrInvalidConfig, c.MaxHintWindow)
	case c.PredictionDelay < 0 || c.PredictionWindow < 0:
		return c, fmt.Errorf("%w: --prediction-delay %v, --prediction-window %v: must not be negative", ErrInvalidConfig, c.PredictionDelay, c.PredictionWindow)
	case c.RepairTakeoverAfter < 0:
		return c, fmt.Errorf("%w: --repair-takeover-after %v: must not be negative", ErrInvalidConfig, c.RepairTakeoverAfter)
	case c.RepairInterval < 0:
		return c, fmt.Errorf("%w: --repair-interval %v: must not be negative (0 = off)", ErrInvalidConfig, c.RepairInterval)
	case c.TombstoneGrace < 0:
		return c, fmt.Errorf("%w: --tombstone-grace %v: must not be negative (0 = never purge)", ErrInvalidConfig, c.TombstoneGrace)
	case c.TombstoneGrace > 0 && (c.MaxHintWindow == 0 || c.MaxHintWindow >= c.TombstoneGrace):
		// Cassandra's rule (max_hint_window below gc_grace): a hint of a write older than a
		// purged tombstone, handed over after the purge, would bring the deleted value back.
		return c, fmt.Errorf("%w: --max-hint-window %v must be shorter than --tombstone-grace %v (and not 0, unbounded) while tombstones are purged: a hint handed over after its key's tombstone was purged would bring the deleted value back",
			ErrInvalidConfig, c.MaxHintWindow, c.TombstoneGrace)
	}
	for _, a := range []struct{ flag, addr string }{{"--http", c.HTTPAddr}, {"--grpc", c.GRPCAddr}, {"--admin", c.AdminAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return c, fmt.Errorf("%w: %s %q: %v", ErrInvalidConfig, a.flag, a.addr, err)
		}
	}
	if c.Advertise != "" {
		if _, port, err := net.SplitHostPort(c.Advertise); err != nil || port == "0" || port == "" {
			return c, fmt.Errorf("%w: --advertise %q: want host:port with a fixed port", ErrInvalidConfig, c.Advertise)
		}
	}
	seen := map[string]bool{}
	self := false
	for _, p := range c.Peers {
		if seen[p.ID] {
			return c, fmt.Errorf("%w: --peers: %q listed twice", ErrInvalidConfig, p.ID)
		}
		seen[p.ID] = true
		self = self || p.ID == c.ID
	}
	if len(c.Peers) > 0 && !self {
		return c, fmt.Errorf("%w: --peers does not list this node (--id %q)", ErrInvalidConfig, c.ID)
	}
	if c.DataDir == "" && !c.InMemory {
		c.DataDir = filepath.Join("data", c.ID)
	}
	return c, nil
}

// defaultID is the --peers entry at the advertised address (else GRPCAddr), else
// hostname-<grpc port>.
func (c Config) defaultID() string {
	for _, p := range c.Peers {
		if p.Addr == c.advertised() {
			return p.ID
		}
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	_, port, _ := net.SplitHostPort(c.GRPCAddr)
	return host + "-" + port
}

// advertised is the gRPC address others reach this node at: Advertise, else GRPCAddr.
func (c Config) advertised() string {
	if c.Advertise != "" {
		return c.Advertise
	}
	return c.GRPCAddr
}

// ParsePeers parses "id=addr,id=addr".
func ParsePeers(s string) ([]Peer, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ps []Peer
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("%q: want id=host:port", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%q: %v", part, err)
		}
		ps = append(ps, Peer{ID: id, Addr: addr})
	}
	return ps, nil
}

// FormatPeers is the inverse of ParsePeers.
func FormatPeers(ps []Peer) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.ID + "=" + p.Addr
	}
	return strings.Join(parts, ",")
}

// peersValue is --peers as a flag.Value.
type peersValue struct{ ps *[]Peer }

func (v peersValue) String() string {
	if v.ps == nil {
		return ""
	}
	return FormatPeers(*v.ps)
}

func (v peersValue) Set(s string) error {
	ps, err := ParsePeers(s)
	if err != nil {
		return err
	}
	*v.ps = ps
	return nil
}

// bytesValue is a byte count flag accepting a plain number or a KiB/MiB/GiB suffix.
type bytesValue struct{ n *int64 }

func (v bytesValue) String() string {
	if v.n == nil {
		return ""
	}
	return strconv.FormatInt(*v.n, 10)
}

func (v bytesValue) Set(s string) error {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return errors.New("want a byte count such as 1048576 or 1MiB")
	}
	*v.n = n * mult
	return nil
}

// reserveValue is --min-free-disk as a flag.Value.
type reserveValue struct{ r *store.Reserve }

func (v reserveValue) String() string {
	if v.r == nil {
		return ""
	}
	return v.r.String()
}

func (v reserveValue) Set(s string) error {
	r, err := store.ParseReserve(s)
	if err != nil {
		return err
	}
	*v.r = r
	return nil
}

// MovePaceOff as Config.MoveLatencyTarget turns the latency pace of ring changes off
// (--move-latency-target off): their streams go at the change's rate alone.
const MovePaceOff time.Duration = -1

// latencyTargetValue is --move-latency-target: a duration, "auto" (0) or "off" (MovePaceOff).
type latencyTargetValue struct{ d *time.Duration }

func (v latencyTargetValue) String() string {
	switch {
	case v.d == nil || *v.d == 0:
		return "auto"
	case *v.d == MovePaceOff:
		return "off"
	}
	return v.d.String()
}

func (v latencyTargetValue) Set(s string) error {
	switch s {
	case "auto":
		*v.d = 0
		return nil
	case "off":
		*v.d = MovePaceOff
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration, auto or off")
	}
	if d < 0 {
		return fmt.Errorf("must not be negative")
	}
	*v.d = d
	return nil
}

// uint64BytesValue is bytesValue for a uint64.
type uint64BytesValue struct{ n *uint64 }

func (v uint64BytesValue) String() string {
	if v.n == nil {
		return ""
	}
	return strconv.FormatUint(*v.n, 10)
}

func (v uint64BytesValue) Set(s string) error {
	var n int64
	if err := (bytesValue{&n}).Set(s); err != nil {
		return err
	}
	*v.n = uint64(n)
	return nil
}

// FlagSet binds every kvnode flag to c.
func (c *Config) FlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&c.ID, "id", c.ID, "node name, unique in the cluster (default hostname-<grpc port>, or the --peers entry at --grpc)")
	fs.StringVar(&c.DataDir, "data", c.DataDir, "badger directory (default ./data/<id>)")
	fs.BoolVar(&c.InMemory, "in-memory", c.InMemory, "keep data in memory only (throwaway node)")
	fs.StringVar(&c.HTTPAddr, "http", c.HTTPAddr, "client HTTP API address")
	fs.StringVar(&c.GRPCAddr, "grpc", c.GRPCAddr, "client, internal and admin gRPC address")
	fs.StringVar(&c.AdminAddr, "admin", c.AdminAddr, "address of /metrics, /debug/pprof/*, /healthz, /readyz")
	fs.StringVar(&c.Advertise, "advertise", c.Advertise, "gRPC host:port peers and clients reach this node at, when --grpc binds 0.0.0.0 (default --grpc)")
	fs.StringVar(&c.CertsDir, "certs-dir", c.CertsDir, "directory of ca.crt, node.crt, node.key: mutual TLS on gRPC, HTTPS on the HTTP and admin ports (kvctl cert creates them)")
	fs.Var(peersValue{&c.Peers}, "peers", "founding members id=grpcaddr,... (this node included); empty: await admission")
	fs.IntVar(&c.Replicas, "replicas", c.Replicas, "replication factor N (capped by cluster size)")
	fs.IntVar(&c.VNodes, "vnodes", c.VNodes, "tokens per node")
	fs.BoolVar(&c.SyncWrites, "sync-writes", c.SyncWrites, "fsync every write before acknowledging it (survives power loss; slower)")
	fs.StringVar(&c.ClusterSecretFile, "cluster-secret-file", c.ClusterSecretFile, "file holding the cluster secret required on internal and admin RPCs")
	fs.DurationVar(&c.ReplicaTimeout, "replica-timeout", c.ReplicaTimeout, "deadline of each call to a replica")
	fs.DurationVar(&c.MaxClockOffset, "max-clock-offset", c.MaxClockOffset, "largest clock offset tolerated: a record stamped further ahead is refused, and a node off most peers by more refuses to coordinate writes (0 = unbounded)")
	fs.Var(bytesValue{&c.MaxValueSize}, "max-value-size", "largest value accepted (HTTP 413 above it)")
	fs.Var(bytesValue{&c.StampCache}, "stamp-cache", "memory that remembers the newest timestamp of recently written keys, so that most writes decide last-write-wins without a read of badger; about 48 bytes plus the key per key (0 = off; K/M/G suffixes)")
	fs.Var(bytesValue{&c.ValueThreshold}, "value-threshold", "records (value plus 10 bytes) of this size or larger are kept in badger's value log, the LSM tree holding a pointer, so that compactions do not rewrite them: 1K made a 4 KiB PUT cost 3.6x less CPU, but overwritten values stay in the log until compactions find them (default: every record in the tree; K/M suffixes)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "how long SIGTERM waits for in-flight requests")
	fs.Var(uint64BytesValue{&c.ChangeRate}, "change-rate", "default streaming throttle of a ring change per receiver, bytes/s (0 = unthrottled; K/M/G suffixes)")
	fs.Var(uint64BytesValue{&c.MoveCheckpointBytes}, "move-checkpoint-bytes", "a range move this node receives saves its resume point after this many bytes (or --move-checkpoint-interval), so a restart pulls at most that again (0 = 64MiB; K/M/G suffixes)")
	fs.DurationVar(&c.MoveCheckpointInterval, "move-checkpoint-interval", c.MoveCheckpointInterval, "a range move this node receives saves its resume point at least this often while it pulls (0 = 10s)")
	fs.DurationVar(&c.MoveStallAfter, "move-stall-after", c.MoveStallAfter, "a range move this node receives with no progress for this long is reported stalled, with its cause, in kvctl ring status, /readyz and ringkv_ring_change_moves_stalled (0 = never)")
	fs.Var(latencyTargetValue{&c.MoveLatencyTarget}, "move-latency-target", "p99 latency of this node's requests that the ring-change streams it receives and sends back off to hold, under the change's rate: a duration, auto (1.5 times the p99 before the streams began) or off (the change's rate alone)")
	fs.DurationVar(&c.RaftHeartbeatTimeout, "raft-heartbeat-timeout", c.RaftHeartbeatTimeout, "raft heartbeat timeout of the metadata group (0 = raft's default)")
	fs.DurationVar(&c.RaftElectionTimeout, "raft-election-timeout", c.RaftElectionTimeout, "raft election timeout of the metadata group (0 = raft's default)")
	// Fault limits.
	fs.IntVar(&c.MaxConnections, "max-connections", c.MaxConnections, "open connections on each of the HTTP and gRPC ports; excess refused at once (0 = min(4096, open-file limit/4))")
	fs.DurationVar(&c.HTTPReadTimeout, "http-read-timeout", c.HTTPReadTimeout, "time to read one HTTP request, header and body")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "an idle keep-alive HTTP connection is closed after it")
	fs.BoolVar(&c.Recover, "recover", c.Recover, "start even if the data is damaged: serve what is left, say so in kvctl status (the rest must be repaired from the peers)")
	fs.Var(bytesValue{&c.MaxHintBytes}, "max-hint-bytes", "bytes of hints kept on disk for peers that missed writes; over it the oldest are dropped and left to repair (0 = unbounded; K/M/G suffixes)")
	fs.DurationVar(&c.MaxHintWindow, "max-hint-window", c.MaxHintWindow, "hints older than this are dropped and left to repair, like Cassandra's max_hint_window; must be shorter than --tombstone-grace (0 = kept until delivered, only with --tombstone-grace 0)")
	fs.Var(uint64BytesValue{&c.HintRate}, "hint-rate", "pace of handing hints over to a peer that is back, bytes/s, so a backlog leaves room for client traffic (0 = unpaced; K/M/G suffixes)")
	fs.DurationVar(&c.RepairInterval, "repair-interval", c.RepairInterval, "how often this node repairs the ranges it is the primary replica of: compares them with the other replicas by Merkle trees and streams only what differs, paced by --repair-rate (±10% jitter; 0 = off; kvctl repair runs one at once)")
	fs.DurationVar(&c.RepairTakeoverAfter, "repair-takeover-after", c.RepairTakeoverAfter, "how long the coordinator of a repair session must fail to answer before the raft leader takes the session over and continues it from the ranges done (a restarted coordinator continues its own at once)")
	fs.Var(uint64BytesValue{&c.RepairRate}, "repair-rate", "pace of background repair per replica, bytes/s walked into trees and pulled (0 = unthrottled; K/M/G suffixes); tree walks go slower while this node's p99 is above --move-latency-target, or above 1.5 times the p99 seen when they began")
	fs.DurationVar(&c.PredictionDelay, "prediction-delay", c.PredictionDelay, "a ring change's load is observed starting this long after it commits (the leader journals it beside the plan's prediction: kvctl ring history)")
	fs.DurationVar(&c.PredictionWindow, "prediction-window", c.PredictionWindow, "how long a ring change's load is observed, per node, to compare with the plan's prediction (0 = not observed)")
	fs.DurationVar(&c.TombstoneGrace, "tombstone-grace", c.TombstoneGrace, "a deleted key's tombstone is kept at least this long, and purged only after a repair that began after the delete covered its range on every replica (keep it longer than a replica may stay down; 0 = never purge)")
	fs.BoolFunc("hot-keys", "keep the hot keys summary of the keys this node coordinates (default true; false only to measure what it costs: kvctl hotkeys then skips this node)", func(v string) error {
		on, err := strconv.ParseBool(v)
		c.HotKeysOff = !on
		return err
	})
	fs.Var(reserveValue{&c.MinFreeDisk}, "min-free-disk", "free space kept on the data volume, a size (1GiB) or a share (5%); below it writes are refused with 507 (\"disk full\"), reads go on, and writes resume once space is freed. Default 5% of the volume, at least 4MiB and at most 1GiB: 4MiB up to an 80MiB volume (a CI tmpfs, a container's scratch space), 1GiB from 20GiB, 0.1% of a TB (CockroachDB's ballast is min(1%, 1GiB)). Badger's memtables, tables and value-log files are sized to the reserve, so what badger writes on its own after writes stop (flushes, compactions) fits in it at any size; an eighth of it is held in a ballast file, deleted when something else fills the volume. A volume under 8MiB is refused; 0 keeps no reserve")
	return fs
}

// maxConnections is MaxConnections, or its default: min(4096, a quarter of the open-file
// limit), so the HTTP and gRPC ports at their limits leave half the files to the store and
// the peers.
func (c Config) maxConnections() int {
	if c.MaxConnections > 0 {
		return c.MaxConnections
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 4096
	}
	return int(max(min(4096, rl.Cur/4), 16))
}

// readSecret reads the cluster secret file ("" when none is configured).
func (c Config) readSecret() (string, error) {
	if c.ClusterSecretFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(c.ClusterSecretFile)
	if err != nil {
		return "", fmt.Errorf("--cluster-secret-file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%w: --cluster-secret-file %s is empty", ErrInvalidConfig, c.ClusterSecretFile)
	}
	return s, nil
}
