package replica

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"ringkv/internal/eventually"
	"ringkv/node/ring"
	"ringkv/proto/kvpb"
)

// fakeTransport is a connection whose state and probe answers a test sets: the
// connectivity events a real one gives only by chance of timing.
type fakeTransport struct {
	mu      sync.Mutex
	state   connectivity.State
	changed chan struct{} // closed and replaced on every change
	probeOK bool
	// probeWaits: a failing probe waits for its context to end, as a gRPC call that waits
	// for the connection (WaitForReady) does.
	probeWaits bool
	probes     atomic.Int64
	wakes      atomic.Int64
}

func newFakeTransport(st connectivity.State) *fakeTransport {
	return &fakeTransport{state: st, changed: make(chan struct{})}
}

func (f *fakeTransport) set(st connectivity.State, probeOK bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probeOK = probeOK
	if st != f.state {
		f.state = st
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

func (f *fakeTransport) State() connectivity.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

func (f *fakeTransport) WaitForStateChange(ctx context.Context, from connectivity.State) bool {
	f.mu.Lock()
	st, ch := f.state, f.changed
	f.mu.Unlock()
	if st != from {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

func (f *fakeTransport) Wake() { f.wakes.Add(1) }

func (f *fakeTransport) Probe(ctx context.Context) error {
	f.probes.Add(1)
	f.mu.Lock()
	ok, waits := f.probeOK, f.probeWaits
	f.mu.Unlock()
	if ok {
		return nil
	}
	if waits {
		<-ctx.Done()
		return ctx.Err()
	}
	return ErrReplicaUnavailable
}

// watchedFaulty is a faulty replica with a transport the coordinator follows.
type watchedFaulty struct {
	*faulty
	tr *fakeTransport
}

func (w watchedFaulty) Transport() Transport { return w.tr }

// An open breaker closes from the transport, with no client request: when the
// peer's connection turns ready, or when a background probe answers. While it is
// open, probes go out on their own schedule.
func TestTransportClosesBreaker(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	tr := newFakeTransport(connectivity.Ready)
	n1 := watchedFaulty{c.nodes["n1"], tr}
	co := New(Config{BreakerFailures: 2, ProbeInterval: 5 * time.Millisecond}, "n0", c.view.Load, c.nodes["n0"], func(m ring.Member) Replica {
		if m.ID == "n1" {
			return n1
		}
		return c.nodes[m.ID]
	}, nil, nil)
	t.Cleanup(func() { co.Close() })

	open := func() {
		t.Helper()
		n1.set(modeDown)
		tr.set(connectivity.TransientFailure, false)
		for range 2 {
			co.Put(ctx, []byte("k"), []byte("v"), 3, 3)
		}
		if got := breakerOf(co, "n1"); got.State != BreakerOpen {
			t.Fatalf("breaker n1 = %+v, want open", got)
		}
		n1.set(modeOK)
	}
	waitClosed := func(how string) {
		t.Helper()
		eventually.Succeeds(t, 5*time.Second, func() error {
			if got := breakerOf(co, "n1"); got.State != BreakerClosed {
				return fmt.Errorf("breaker n1 = %+v, want closed once %s", got, how)
			}
			return nil
		})
	}

	// Event 1: the connection turns ready.
	open()
	probes := tr.probes.Load()
	eventually.Succeeds(t, 5*time.Second, func() error {
		if got := tr.probes.Load() - probes; got < 3 {
			return fmt.Errorf("%d probes while open, want 3 or more on the probe schedule", got)
		}
		return nil
	})
	if got := breakerOf(co, "n1"); got.State != BreakerOpen {
		t.Fatalf("breaker n1 = %+v after failed probes, want open", got)
	}
	calls := n1.writes.Load() + n1.reads.Load()
	tr.set(connectivity.Ready, false)
	waitClosed("the connection is ready")

	// Event 2: a probe answers while the connection still reports a failure.
	open()
	tr.set(connectivity.TransientFailure, true)
	waitClosed("a probe answered")
	if got := n1.writes.Load() + n1.reads.Load(); got != calls+2 {
		t.Errorf("n1 got %d calls, want only the 2 that opened its breaker: no client request is the probe", got-calls)
	}
	// Closed: no more probes.
	probes = tr.probes.Load()
	time.Sleep(50 * time.Millisecond)
	if got := tr.probes.Load() - probes; got > 1 {
		t.Errorf("%d probes with the breaker closed, want none", got)
	}
}

// watchedCoordinator is n0's coordinator whose peers n1 and n2 are watched through the fake
// transports tr1 and tr2.
func watchedCoordinator(t *testing.T, c *cluster, cfg Config, tr1, tr2 *fakeTransport) *Coordinator {
	t.Helper()
	co := New(cfg, "n0", c.view.Load, c.nodes["n0"], func(m ring.Member) Replica {
		switch m.ID {
		case "n1":
			return watchedFaulty{c.nodes["n1"], tr1}
		case "n2":
			return watchedFaulty{c.nodes["n2"], tr2}
		}
		return nil
	}, nil, nil)
	t.Cleanup(func() { co.Close() })
	return co
}

// Unreached lists the peers whose first connection attempt is not over, and
// starts it: a node is usable once it is empty.
func TestUnreached(t *testing.T) {
	c := newCluster(t, 3)
	tr1, tr2 := newFakeTransport(connectivity.Idle), newFakeTransport(connectivity.Idle)
	co := watchedCoordinator(t, c, Config{Hints: memHints(t, 64<<20)}, tr1, tr2)
	if got := co.Unreached(); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("Unreached() = %v, want [n1 n2]", got)
	}
	eventually.Succeeds(t, 5*time.Second, func() error {
		if tr1.wakes.Load() == 0 || tr2.wakes.Load() == 0 {
			return errors.New("the first connection attempts were not started")
		}
		return nil
	})
	tr1.set(connectivity.Ready, false)
	tr2.set(connectivity.Connecting, false)
	eventually.Succeeds(t, 5*time.Second, func() error {
		if got := co.Unreached(); !slices.Equal(got, []string{"n2"}) {
			return fmt.Errorf("Unreached() = %v, want [n2]", got)
		}
		return nil
	})
	tr2.set(connectivity.TransientFailure, false) // refused: tried, and down
	eventually.Succeeds(t, 5*time.Second, func() error {
		if got := co.Unreached(); len(got) != 0 {
			return fmt.Errorf("Unreached() = %v, want none", got)
		}
		return nil
	})
}

// A peer that stops counts as gone as soon as its connection is lost and the reconnect
// refused, not at the next routine probe nor at the probe's timeout; and the other peers are
// probed at once, so that they hear of the departure (the verdict on a flapping node waits
// for most of its peers to have seen it).
func TestDepartureSeenAtOnce(t *testing.T) {
	c := newCluster(t, 3)
	tr1, tr2 := newFakeTransport(connectivity.Ready), newFakeTransport(connectivity.Ready)
	tr1.set(connectivity.Ready, true)
	tr2.set(connectivity.Ready, true)
	// Routine probes and probe timeouts far beyond the test: only the events can act.
	cfg := Config{HealthInterval: time.Hour, ProbeTimeout: time.Hour, ProbeInterval: 5 * time.Millisecond}
	co := watchedCoordinator(t, c, cfg, tr1, tr2)
	co.Unreached() // starts following the peers: each is probed once, and seen up
	eventually.Succeeds(t, 5*time.Second, func() error {
		if tr1.probes.Load() == 0 || tr2.probes.Load() == 0 {
			return errors.New("the first probes were not sent")
		}
		return nil
	})
	probes1, probes2 := tr1.probes.Load(), tr2.probes.Load()
	tr1.mu.Lock()
	tr1.probeWaits = true
	tr1.mu.Unlock()
	tr1.set(connectivity.Idle, false) // n1 stopped: its connection is lost
	eventually.Succeeds(t, 5*time.Second, func() error {
		if tr1.probes.Load() == probes1 {
			return errors.New("no probe of n1 once its connection was lost")
		}
		return nil
	})
	tr1.set(connectivity.TransientFailure, false) // the reconnect is refused
	eventually.Succeeds(t, 5*time.Second, func() error {
		if got := co.peerState("n1").link.stats(time.Now(), "n1").GetFlaps(); got != 1 {
			return fmt.Errorf("n1 flaps = %d, want 1 (its departure)", got)
		}
		return nil
	})
	eventually.Succeeds(t, 5*time.Second, func() error {
		if tr2.probes.Load() == probes2 {
			return errors.New("n2 not probed once n1's departure was counted")
		}
		return nil
	})
}

// grpcPeer is a Replica service with health on a fixed loopback address that a
// test stops and starts again, as a restarted node.
type grpcPeer struct {
	t    *testing.T
	addr string
	srv  *replicaServer
	gs   *grpc.Server
	done chan struct{}
}

func (p *grpcPeer) start() {
	p.t.Helper()
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var lis net.Listener
	eventually.Succeeds(p.t, 10*time.Second, func() error {
		var err error
		lis, err = net.Listen("tcp", addr)
		return err
	})
	p.addr = lis.Addr().String()
	p.gs = grpc.NewServer()
	kvpb.RegisterReplicaServer(p.gs, p.srv)
	healthpb.RegisterHealthServer(p.gs, health.NewServer())
	p.done = make(chan struct{})
	go func(gs *grpc.Server, done chan struct{}) {
		defer close(done)
		gs.Serve(lis)
	}(p.gs, p.done)
}

func (p *grpcPeer) stop() {
	if p.gs != nil {
		p.gs.Stop()
		<-p.done
		p.gs = nil
	}
}

// overGRPC is a 2-node ring whose coordinator n0 reaches n1 over real gRPC, on
// a connection with gRPC's default backoff (1 s growing to 2 min: only a wake
// gets a reconnect soon), through a peer the test can stop and start again.
func overGRPC(t *testing.T, cfg Config) (*cluster, *grpcPeer, *grpc.ClientConn, *Coordinator) {
	t.Helper()
	c := newCluster(t, 2)
	peer := &grpcPeer{t: t, srv: &replicaServer{local: c.nodes["n1"].Local, epoch: 1}}
	peer.start()
	t.Cleanup(peer.stop)
	conn, err := grpc.NewClient(peer.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	remote := NewRemote(conn, func() uint64 { return 1 })
	c.view.Store(&ring.View{Current: newRing(t, 1, 2, []string{"n0", "n1"})})
	co := New(cfg, "n0", c.view.Load, c.nodes["n0"], func(m ring.Member) Replica { return remote }, nil, nil)
	t.Cleanup(func() { co.Close() })
	return c, peer, conn, co
}

// A peer restarted on the same address is used by the first request that needs
// it, even while this side's connection waits out a long reconnect backoff; and
// without any request, the background probe closes its breaker.
func TestRestartedPeerUsedAtOnce(t *testing.T) {
	ctx := testCtx(t)
	// A replica timeout a loaded machine reaches: the first call after the restart waits for
	// the new connection's handshake within it (500 ms failed a fresh-clone CI at load ~20:
	// "context deadline exceeded"). The probe runs hourly, so a success is still the call's.
	c, peer, conn, co := overGRPC(t, Config{BreakerFailures: 3, ProbeInterval: time.Hour, ReplicaTimeout: 2 * time.Second})

	for round := range 3 {
		if _, err := co.Put(ctx, []byte("k"), []byte("v"), 2, 2); err != nil {
			t.Fatalf("round %d: Put with both up: %v", round, err)
		}
		peer.stop()
		for range 3 {
			co.Put(ctx, []byte("k"), []byte("down"), 1, 2)
		}
		// The calls to n1 end after the writes were answered.
		eventually.Succeeds(t, 5*time.Second, func() error {
			if got := breakerOf(co, "n1"); got.State != BreakerOpen {
				return fmt.Errorf("round %d: breaker n1 = %+v, want open", round, got)
			}
			return nil
		})
		// The connection knows the peer is gone (failed, or idle after its backoff).
		eventually.Succeeds(t, 5*time.Second, func() error {
			if st := conn.GetState(); st != connectivity.TransientFailure && st != connectivity.Idle {
				return fmt.Errorf("connection %v, want TRANSIENT_FAILURE or IDLE", st)
			}
			return nil
		})
		peer.start()
		start := time.Now()
		ts, err := co.Put(ctx, []byte("k"), []byte(fmt.Sprint("v", round)), 2, 2)
		if err != nil {
			t.Fatalf("round %d: first ack=2 write after the peer is back: %v", round, err)
		}
		t.Logf("round %d: first write after restart answered in %v", round, time.Since(start))
		if rec, ok := c.nodes["n1"].has(t, "k"); !ok || rec.TS != ts {
			t.Fatalf("round %d: n1 holds %+v, want the write at %d", round, rec, ts)
		}
		if got := breakerOf(co, "n1"); got.State != BreakerClosed {
			t.Fatalf("round %d: breaker n1 = %+v, want closed", round, got)
		}
	}
}

// Without any client request, a peer back from a restart has its breaker closed
// by the background probe, over real gRPC.
func TestProbeClosesBreakerOverGRPC(t *testing.T) {
	ctx := testCtx(t)
	// No hints: their handoff would call the peer once it is back.
	_, peer, _, co := overGRPC(t, Config{BreakerFailures: 3, ProbeInterval: 20 * time.Millisecond, ProbeTimeout: 200 * time.Millisecond})

	peer.stop()
	for range 3 {
		co.Put(ctx, []byte("k"), []byte("v"), 2, 2)
	}
	if got := breakerOf(co, "n1"); got.State != BreakerOpen {
		t.Fatalf("breaker n1 = %+v, want open", got)
	}
	// Still down: the probes fail and the breaker stays open.
	time.Sleep(100 * time.Millisecond)
	if got := breakerOf(co, "n1"); got.State != BreakerOpen {
		t.Fatalf("breaker n1 = %+v while the peer is down, want open", got)
	}
	calls := peer.srv.calls.Load()
	peer.start()
	eventually.Succeeds(t, 5*time.Second, func() error {
		if got := breakerOf(co, "n1"); got.State != BreakerClosed {
			return fmt.Errorf("breaker n1 = %+v, want closed by the probe", got)
		}
		return nil
	})
	if got := peer.srv.calls.Load(); got != calls {
		t.Errorf("the peer served %d Replica calls: no client request may be the probe", got-calls)
	}
}
