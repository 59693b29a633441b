package repair

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

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
	cur    *session // running, else the last one; nil before the first
	nextID uint64
	notify chan struct{} // closed at every change of cur's progress
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
	s := &Service{cfg: cfg, notify: make(chan struct{}), nextID: uint64(cfg.Now().Unix()) << 8}
	s.base, s.cancel = context.WithCancel(context.Background())
	return s
}
