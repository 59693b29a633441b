//go:build linux

package loadgen

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The closed loop over HTTP runs on event loops, as wrk does: each loop is one goroutine locked
// to its OS thread, owning some of the connections as non-blocking sockets of its own (not Go's
// net package, whose poller would be woken by them too) and one epoll instance, and it sends,
// reads and times every request of its connections itself. With a goroutine per connection
// blocked in Go's poller instead, every answer costs a wake-up of the runtime's poller and a
// goroutine switch (on a generator pinned to one CPU, about one extra context switch per
// request, see docs/bench.md), and answers that arrive together are timestamped only after the
// goroutines ahead of them have written their next requests.
//
// There is one loop per GOMAXPROCS (at most one per connection): a generator pinned to one CPU
// (taskset) runs one loop, like wrk -t1.

// evConn is one connection of an event loop and the request on it.
type evConn struct {
	w    *worker
	fd   int // -1: none; the next request dials
	idx  int32
	conn bool   // the connect finished
	ev   uint32 // the events epoll watches for

	op       Op
	key      []byte
	out      []byte // the request
	written  int    // bytes of out written
	in       []byte // bytes read and not yet parsed
	p        respParser
	sent     time.Time
	deadline time.Time
	busy     bool // a request is in flight
	fin      bool // no more requests
}

// evLoop is one event loop and its connections.
type evLoop struct {
	t       *HTTPTarget
	sa      unix.Sockaddr
	domain  int
	ep      int
	conns   []*evConn
	next    *atomic.Int64
	from    time.Time // measureFrom
	end     time.Time
	timeout time.Duration
	spin    time.Duration
	events  []unix.EpollEvent
	buf     []byte    // read buffer
	ready   []*evConn // answered (or failed) in this pass; their next requests go after it
	retry   []*evConn // could not dial; they try again after the loop's next wait
	active  int
}

// runClosedLoops runs the closed loop of workers on event loops. It reports false, having
// sent nothing, when it cannot (TLS, the address does not resolve, no epoll): Run then falls
// back to a goroutine per worker.
func (t *HTTPTarget) runClosedLoops(ctx context.Context, workers []*worker, next *atomic.Int64, measureFrom, end time.Time) bool {
	if t.tls != nil {
		return false // the loops speak plain TCP
	}
	addr, err := net.ResolveTCPAddr("tcp", t.host)
	if err != nil || addr.IP == nil || addr.Zone != "" {
		return false // (an IPv6 zone: the goroutine path's dialer handles it)
	}
	// One Sockaddr per loop: Connect encodes it into a buffer inside it.
	domain := unix.AF_INET
	sockaddr := func() unix.Sockaddr {
		return &unix.SockaddrInet4{Port: addr.Port, Addr: [4]byte(addr.IP.To4())}
	}
	if addr.IP.To4() == nil {
		domain = unix.AF_INET6
		sockaddr = func() unix.Sockaddr {
			return &unix.SockaddrInet6{Port: addr.Port, Addr: [16]byte(addr.IP.To16())}
		}
	}
	n := min(runtime.GOMAXPROCS(0), len(workers))
	loops := make([]*evLoop, n)
	for i := range loops {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			for _, l := range loops[:i] {
				unix.Close(l.ep)
			}
			return false
		}
		loops[i] = &evLoop{t: t, sa: sockaddr(), domain: domain, ep: ep, next: next, from: measureFrom, end: end,
			timeout: workers[0].cfg.Timeout, spin: workers[0].cfg.Spin, buf: make([]byte, 64<<10)}
	}
	for i, w := range workers {
		l := loops[i%n]
		l.conns = append(l.conns, &evConn{w: w, fd: -1, idx: int32(len(l.conns))})
	}
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Go(func() { l.run(ctx) })
	}
	wg.Wait()
	return true
}

// run drives the loop's connections until every one has finished: the run's end passed (the
// requests in flight then are answered and counted) or ctx ended (they are dropped).
func (l *evLoop) run(ctx context.Context) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer unix.Close(l.ep)
	defer func() {
		for _, c := range l.conns {
			l.closeConn(c)
		}
	}()
	l.events = make([]unix.EpollEvent, len(l.conns))
	l.active = len(l.conns)
	for _, c := range l.conns {
		l.start(ctx, c)
	}
	nextCheck := time.Now()
	for l.active > 0 && ctx.Err() == nil {
		// The answers of the last pass were all timestamped before any next request is
		// written (as wrk does), so an answer's latency does not include writing the
		// others' requests. (start may append a connection that failed at once: it is
		// started again in this same loop.)
		for i := 0; i < len(l.ready); i++ {
			l.start(ctx, l.ready[i])
		}
		l.ready = l.ready[:0]
		if l.active == 0 {
			break
		}
		n, err := epollWait(l.ep, l.events, 0)
		if n == 0 && err == nil && l.spin > 0 { // Config.Spin
			for until := time.Now().Add(l.spin); n == 0 && err == nil && time.Now().Before(until); {
				n, err = epollWait(l.ep, l.events, 0)
			}
		}
		if n == 0 && err == nil {
			// Nothing ready: sleep through the runtime (EpollWait tells it this thread is
			// blocked, so its P serves other goroutines, such as an in-process server's).
			n, err = unix.EpollWait(l.ep, l.events, 50) // ms: the longest ctx and timeouts wait
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return // cannot happen with a valid epoll fd and buffer
		}
		for _, ev := range l.events[:max(n, 0)] {
			c := l.conns[ev.Fd]
			if c.fd < 0 || !c.busy {
				continue
			}
			if ev.Events&unix.EPOLLOUT != 0 || !c.conn {
				l.writable(ctx, c)
			}
			if c.busy && c.conn && ev.Events&(unix.EPOLLIN|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
				l.readable(ctx, c)
			}
		}
		if now := time.Now(); !now.Before(nextCheck) {
			nextCheck = now.Add(10 * time.Millisecond)
			for _, c := range l.conns {
				if c.busy && now.After(c.deadline) {
					l.fail(ctx, c, KindTimeout)
				}
			}
		}
		l.ready = append(l.ready, l.retry...) // dialled again after this wait
		l.retry = l.retry[:0]
	}
}

// start sends the connection's next request, or finishes the connection when the run is over.
func (l *evLoop) start(ctx context.Context, c *evConn) {
	if ctx.Err() != nil || !time.Now().Before(l.end) {
		l.finish(c)
		return
	}
	i := l.next.Add(1) - 1
	if max := c.w.cfg.Requests; max > 0 && i >= max {
		l.finish(c)
		return
	}
	op, key, val := c.w.pick(i)
	c.op = op
	c.key = append(c.key[:0], key...)
	c.out = l.t.appendRequest(c.out[:0], c.op, c.key, val)
	c.written, c.in = 0, c.in[:0]
	c.p.reset()
	c.busy = true
	c.sent = time.Now()
	c.deadline = c.sent.Add(l.timeout)
	if c.fd < 0 {
		if err := l.dial(c); err != nil {
			// Counted, and dialled again after the loop's next wait: retrying here
			// would spin (EMFILE, no ports left) while the other connections starve.
			l.record(ctx, c, KindConnection)
			l.retry = append(l.retry, c)
			return
		}
		if !c.conn {
			return // writable() writes once the connect finishes
		}
	}
	l.writable(ctx, c)
}

// dial opens a non-blocking connection and registers it; the connect usually finishes later.
func (l *evLoop) dial(c *evConn) error {
	fd, err := unix.Socket(l.domain, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	err = unix.Connect(fd, l.sa)
	switch {
	case err == nil:
		c.conn = true
	case errors.Is(err, unix.EINPROGRESS):
		c.conn = false
	default:
		unix.Close(fd)
		return err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT, Fd: c.idx}
	if c.conn {
		ev.Events = unix.EPOLLIN
	}
	c.ev = ev.Events
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return err
	}
	c.fd = fd
	return nil
}

// writable finishes a connect and writes what is left of the request.
func (l *evLoop) writable(ctx context.Context, c *evConn) {
	if !c.conn {
		soerr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil || soerr != 0 {
			l.fail(ctx, c, KindConnection)
			return
		}
		c.conn = true
	}
	for c.written < len(c.out) {
		n, err := rawWrite(c.fd, c.out[c.written:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			l.interest(c, unix.EPOLLIN|unix.EPOLLOUT) // the rest when the socket drains
			return
		}
		if err != nil {
			l.fail(ctx, c, KindConnection)
			return
		}
		c.written += n
	}
	l.interest(c, unix.EPOLLIN)
}

// interest sets the events the connection waits for (a system call only when they change).
func (l *evLoop) interest(c *evConn, events uint32) {
	if c.ev == events {
		return
	}
	c.ev = events
	ev := unix.EpollEvent{Events: events, Fd: c.idx}
	_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, c.fd, &ev)
}

// readable reads what arrived and, once the answer is complete, counts it and sends the next
// request.
func (l *evLoop) readable(ctx context.Context, c *evConn) {
	n, err := rawRead(c.fd, l.buf)
	switch {
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
		return
	case err != nil:
		l.fail(ctx, c, KindConnection)
		return
	}
	var done bool
	if n == 0 { // the server closed the connection
		if err := c.p.eof(); err != nil {
			l.fail(ctx, c, KindConnection)
			return
		}
		done = true
	} else {
		data := l.buf[:n]
		if len(c.in) > 0 { // an incomplete line from the last read
			c.in = append(c.in, data...)
			data = c.in
		}
		used, ok, err := c.p.feed(data)
		// A malformed answer counts as the goroutine path counts it: a connection error.
		if err != nil {
			l.fail(ctx, c, KindConnection)
			return
		}
		if !ok && len(data)-used > len(l.buf) {
			l.fail(ctx, c, KindConnection) // a line longer than the read buffer
			return
		}
		c.in = append(c.in[:0], data[used:]...)
		done = ok
	}
	if !done {
		return
	}
	// wrk and the goroutine path read one answer per request; anything after it is not ours.
	l.record(ctx, c, kindOfStatus(c.p.code))
	if !c.p.keep || n == 0 || len(c.in) > 0 || c.written < len(c.out) {
		// Not reusable: the server says so, or sent more than the answer, or answered
		// before the whole request was written (the rest would precede the next one).
		l.closeConn(c)
	}
	l.ready = append(l.ready, c)
}

// fail counts the request in flight as failed with kind, drops the connection and sends the
// next request.
func (l *evLoop) fail(ctx context.Context, c *evConn, kind Kind) {
	l.record(ctx, c, kind)
	l.closeConn(c)
	l.ready = append(l.ready, c)
}

// record counts the answer (or failure) of the connection's request, timed now.
func (l *evLoop) record(ctx context.Context, c *evConn, kind Kind) {
	c.busy = false
	c.w.record(ctx, c.op, c.key, kind, time.Time{}, c.sent, time.Now(), l.from)
}

func (l *evLoop) closeConn(c *evConn) {
	if c.fd >= 0 {
		_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, c.fd, nil)
		unix.Close(c.fd)
		c.fd, c.conn = -1, false
	}
}

func (l *evLoop) finish(c *evConn) {
	if !c.fin {
		c.fin, c.busy = true, false
		l.active--
		// Closed now: a level-triggered socket the server closes or writes to would
		// otherwise wake every wait while the other connections finish.
		l.closeConn(c)
	}
}

// The loop's non-blocking system calls bypass the runtime's syscall bookkeeping (RawSyscall):
// read and write on non-blocking sockets, and epoll_wait with a zero timeout, never block, and
// through the runtime each would cost an entersyscall/exitsyscall pair, and, when the monitor
// thread (sysmon) catches one, a hand-off of the P to another thread. Only the wait that can
// block goes through the runtime (unix.EpollWait): a thread blocked in a raw system call keeps
// its P, which would starve every other goroutine of the process (an in-process server, the
// live line) until the runtime preempts it.

func epollWait(ep int, events []unix.EpollEvent, msec int) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func rawRead(fd int, b []byte) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func rawWrite(fd int, b []byte) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
