package repair

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"ringkv/node/cluster"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// Journal keeps repair sessions where every member reads them (cluster.Cluster, in raft):
// a session's plan, its coordinator, the ranges done, and whether repair is paused. Each
// call returns once this node has applied what it journaled. Safe for concurrent use.
type Journal interface {
	Repairs() *cluster.RepairJournal
	BeginRepair(ctx context.Context, s *cluster.RepairSession) (uint64, error)
	RepairRangeDone(ctx context.Context, id uint64, coordinator string, i int, result []byte) error
	// EndRepair with coordinator "" ends the session whoever coordinates it.
	EndRepair(ctx context.Context, id uint64, coordinator, state, errText string) error
	TakeOverRepair(ctx context.Context, id uint64, from, to string) error
	PauseRepair(ctx context.Context, by, reason string) error
	ResumeRepair(ctx context.Context) error
	// Leader is the raft leader's id ("" while none is known); IsLeader whether it is this node.
	Leader() (id, addr string)
	IsLeader() bool
}

// Dialer reaches members' Replica and Admin services (this node's own included), with the
// cluster secret and TLS of the node's other internal calls. Safe for concurrent use.
type Dialer interface {
	Replica(addr string) (kvpb.ReplicaClient, error)
	Admin(addr string) (kvpb.AdminClient, error)
}

// Config is what the coordinating side of repair needs.
type Config struct {
	// Self is this node's id.
	Self string
	// View is the ring the node routes by (nil while awaiting admission). Lock-free.
	View func() *ring.View
	// Watch is closed at the next change of the view (cluster.Cluster.Watch); a session
	// stops when a ring change begins.
	Watch func() <-chan struct{}
	Dial  Dialer
	// Journal keeps the sessions (required).
	Journal Journal
	// TakeoverAfter is how long the coordinator of a session in flight must fail to answer
	// before the raft leader takes the session over (0 = 30 s).
	TakeoverAfter time.Duration
	// DefaultRate is the streaming and tree-walk throttle of a session that asks for none,
	// bytes per second per replica (0 = unthrottled).
	DefaultRate uint64
	// Interval is the period of background repair of this node's primary ranges (0 = off),
	// jittered by ±10%; BackgroundRate its throttle.
	Interval       time.Duration
	BackgroundRate uint64
	// Parallel is how many ranges a session repairs at once (0 = 2).
	Parallel int
	// CallTimeout bounds each tree or pull call to a replica (0 = 10 minutes).
	CallTimeout time.Duration
	Now         func() time.Time
	Logger      *slog.Logger
}

// Service coordinates repair sessions on this node: plans, one session at a time, its
// progress, abort, and the background schedule. Safe for concurrent use.
type Service struct {
	cfg Config

	base   context.Context // sessions run under it; Run cancels it on the way out
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	cur    *session      // running, else the last one; nil before the first
	notify chan struct{} // closed at every change of cur's progress or of the pause
	paused string        // the pause last seen in the journal, to wake watchers when it changes
	// starting counts Starts between journaling a session and running it: the journal loop
	// does not continue this node's sessions meanwhile.
	starting int
}

// NewService returns the coordinating side of repair; Run drives its background schedule
// and owns its sessions.
func NewService(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 2
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Minute
	}
	if cfg.TakeoverAfter <= 0 {
		cfg.TakeoverAfter = 30 * time.Second
	}
	s := &Service{cfg: cfg, notify: make(chan struct{})}
	s.base, s.cancel = context.WithCancel(context.Background())
	return s
}
