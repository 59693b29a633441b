// Package tcpinfo counts the TCP segments a node sends to each peer address and how many of
// them the kernel had to send again: lost packets on a link, which latency alone hides (a
// loopback or LAN link retransmits within milliseconds, and a loaded machine is slow on
// every link alike).
package tcpinfo

import (
	"context"
	"net"
	"sync"
	"syscall"

	"ringkv/internal/netconn"
)

// Counts are a connection's (or an address's) segments sent and retransmitted since it
// opened.
type Counts struct {
	Segments, Retransmits uint64
}

func (c Counts) add(o Counts) Counts {
	return Counts{c.Segments + o.Segments, c.Retransmits + o.Retransmits}
}

// Tracker keeps the counts of TCP connections by key: those it dials by their address, and
// those it is given to Track (a server's accepted connections) by the key given. Safe for
// concurrent use.
type Tracker struct {
	d      net.Dialer
	mu     sync.Mutex
	live   map[string]map[syscallConn]bool
	closed map[string]Counts // counts of the connections already closed, per key
	keys   map[syscallConn]string
}

// syscallConn is a connection whose socket can be read.
type syscallConn interface {
	SyscallConn() (syscall.RawConn, error)
}

// New returns an empty Tracker.
func New() *Tracker {
	return &Tracker{live: map[string]map[syscallConn]bool{}, closed: map[string]Counts{}, keys: map[syscallConn]string{}}
}

// Track counts c's segments under key until Untrack. c may wrap a TCP connection (a
// tls.Conn, anything with NetConn); other connections are ignored.
func (t *Tracker) Track(key string, c net.Conn) {
	if tc := tcpOf(c); tc != nil {
		t.add(key, tc)
	}
}

// Untrack stops counting c. A connection already closed leaves no counts behind (its last
// ones cannot be read): the key's counts may then shrink.
func (t *Tracker) Untrack(c net.Conn) {
	if tc := tcpOf(c); tc != nil {
		t.remove(tc, counts(tc))
	}
}

// tcpOf unwraps c down to its TCP connection; nil when there is none.
func tcpOf(c net.Conn) *net.TCPConn {
	tc, _ := netconn.As[*net.TCPConn](c)
	return tc
}

func (t *Tracker) add(key string, c syscallConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live[key] == nil {
		t.live[key] = map[syscallConn]bool{}
	}
	t.live[key][c] = true
	t.keys[c] = key
}

func (t *Tracker) remove(c syscallConn, last Counts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key, ok := t.keys[c]
	if !ok {
		return
	}
	delete(t.keys, c)
	delete(t.live[key], c)
	t.closed[key] = t.closed[key].add(last)
}

// Dial opens a TCP connection to addr and tracks it until it is closed (for
// grpc.WithContextDialer).
func (t *Tracker) Dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := t.d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	w := &conn{TCPConn: tc, t: t}
	t.add(addr, w)
	return w, nil
}

// Counts returns the segments sent and retransmitted over every connection tracked under
// key (a dialed address), open or closed: for dialed connections it only grows. Zero where
// the system cannot tell.
func (t *Tracker) Counts(key string) Counts {
	t.mu.Lock()
	conns := make([]syscallConn, 0, len(t.live[key]))
	for c := range t.live[key] {
		conns = append(conns, c)
	}
	sum := t.closed[key]
	t.mu.Unlock()
	for _, c := range conns {
		sum = sum.add(counts(c))
	}
	return sum
}

func counts(c syscallConn) Counts {
	raw, err := c.SyscallConn()
	if err != nil {
		return Counts{}
	}
	var out Counts
	raw.Control(func(fd uintptr) { out = read(fd) })
	return out
}

// conn is a dialed connection: its Close keeps its last counts.
type conn struct {
	*net.TCPConn
	t    *Tracker
	once sync.Once
}

// Close keeps the connection's last counts and closes it.
func (c *conn) Close() error {
	c.once.Do(func() { c.t.remove(c, counts(c)) })
	return c.TCPConn.Close()
}
