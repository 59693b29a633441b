package server

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"ringkv/internal/netconn"
)

// ConnLimit bounds the connections a listener holds open, so that a flood of idle
// connections cannot use up the process's open files. At the limit, a new connection first
// makes room by closing the oldest one that is doing nothing (for HTTP: no request read yet,
// or idle between keep-alive requests, as http.Server's ConnState reports); when none is
// idle, the new connection is refused at once (Refuse is called with it, then it is
// closed), never queued. Safe for concurrent use.
type ConnLimit struct {
	max int
	// Refuse, when set, writes a refusal on an excess connection before it is closed
	// (e.g. RefuseHTTP). It must not block: the connection has a short write deadline.
	Refuse func(net.Conn)

	// idled counts connections going idle: limitConn.idleSince orders them without a clock.
	idled atomic.Int64

	mu    sync.Mutex
	open  map[*limitConn]struct{}
	count int
}

// NewConnLimit returns a limit of max open connections (max < 1 = unlimited).
func NewConnLimit(max int) *ConnLimit {
	return &ConnLimit{max: max, open: map[*limitConn]struct{}{}}
}

// Listener wraps ln: its connections count against l.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener { return &limitListener{Listener: ln, l: l} }

// ConnState is an http.Server ConnState hook: it tells l which connections are idle. It runs
// twice per request (active, then idle again), so it takes no lock: the state lives in the
// connection.
func (l *ConnLimit) ConnState(c net.Conn, s http.ConnState) {
	lc, ok := netconn.As[*limitConn](c) // under HTTPSListener's TLS
	if !ok {
		return
	}
	switch s {
	case http.StateNew, http.StateIdle:
		lc.idleSince.Store(l.idled.Add(1))
	case http.StateActive, http.StateHijacked:
		lc.idleSince.Store(0)
	}
}

// Open is the number of connections held.
func (l *ConnLimit) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// admit counts c in, closing the oldest idle connection to make room at the limit; false:
// no room.
func (l *ConnLimit) admit(c *limitConn) bool {
	var victim *limitConn
	l.mu.Lock()
	if l.max > 0 && l.count >= l.max {
		var oldest int64
		for oc := range l.open {
			if since := oc.idleSince.Load(); since != 0 && (victim == nil || since < oldest) {
				victim, oldest = oc, since
			}
		}
		if victim == nil {
			l.mu.Unlock()
			return false
		}
		l.forget(victim)
	}
	l.count++
	l.open[c] = struct{}{}
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
	}
	return true
}

// forget stops counting c. Callers hold mu.
func (l *ConnLimit) forget(c *limitConn) {
	if _, ok := l.open[c]; ok {
		delete(l.open, c)
		l.count--
	}
}

type limitListener struct {
	net.Listener
	l *ConnLimit
}

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitConn{Conn: c, l: ll.l}
		if ll.l.admit(lc) {
			return lc, nil
		}
		if ll.l.Refuse != nil {
			c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			ll.l.Refuse(c)
		}
		c.Close()
	}
}

type limitConn struct {
	net.Conn
	l    *ConnLimit
	once sync.Once
	// idleSince is 0 while the connection is busy (a request read or being served), else
	// when it went idle: ConnLimit.idled's count then (smaller = idle for longer).
	idleSince atomic.Int64
}

// NetConn returns the connection accepted (as tls.Conn.NetConn does).
func (c *limitConn) NetConn() net.Conn { return c.Conn }

func (c *limitConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.forget(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// refusal is what RefuseHTTP writes.
const refusal = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Connection: close\r\nContent-Length: 25\r\n\r\ntoo many open connections"

// RefuseHTTP answers an excess HTTP connection 503 without reading its request.
func RefuseHTTP(c net.Conn) { c.Write([]byte(refusal)) }
