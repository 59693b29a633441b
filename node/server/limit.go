package server

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
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

	mu    sync.Mutex
	open  map[*limitConn]idleState
	count int
}

type idleState struct {
	idle  bool
	since time.Time
}

// NewConnLimit returns a limit of max open connections (max < 1 = unlimited).
func NewConnLimit(max int) *ConnLimit {
	return &ConnLimit{max: max, open: map[*limitConn]idleState{}}
}

// Listener wraps ln: its connections count against l.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener { return &limitListener{Listener: ln, l: l} }

// ConnState is an http.Server ConnState hook: it tells l which connections are idle.
func (l *ConnLimit) ConnState(c net.Conn, s http.ConnState) {
	if tc, isTLS := c.(*tls.Conn); isTLS {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.open[lc]; !open {
		return
	}
	switch s {
	case http.StateNew, http.StateIdle:
		l.open[lc] = idleState{idle: true, since: time.Now()}
	case http.StateActive, http.StateHijacked:
		l.open[lc] = idleState{}
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
		var oldest time.Time
		for oc, st := range l.open {
			if st.idle && (victim == nil || st.since.Before(oldest)) {
				victim, oldest = oc, st.since
			}
		}
		if victim == nil {
			l.mu.Unlock()
			return false
		}
		l.forget(victim)
	}
	l.count++
	l.open[c] = idleState{idle: false}
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
