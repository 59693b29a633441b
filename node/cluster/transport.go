package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"ringkv/proto/kvpb"
)

// The raft transport runs over the node's gRPC port: raft's own NetworkTransport (its wire
// format, connection pool and pipelining, all maintained upstream) speaks through a
// StreamLayer whose connections are Cluster.RaftStream bidirectional gRPC streams. A member's
// raft address is therefore its gRPC address, and a node needs no second port.
//
// github.com/Jille/raft-grpc-transport would do this with its own wire format, but it is not
// available from the Go module proxy this project builds against (403), so the tunnel is
// hand-written: a net.Conn over a gRPC stream, about 200 lines, and nothing else of raft's
// transport is re-implemented.

// streamLayer is a raft.StreamLayer whose Accept yields the connections that reached the
// Cluster service's RaftStream handler and whose Dial opens a RaftStream to a peer.
// Safe for concurrent use.
type streamLayer struct {
	addr    string
	clients *peerClients
	accept  chan net.Conn
	closed  chan struct{}
	once    sync.Once

	mu    sync.Mutex
	conns map[*streamConn]struct{} // accepted connections, closed by closeAll
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func newStreamLayer(addr string, clients *peerClients) *streamLayer {
	return &streamLayer{
		addr: addr, clients: clients, accept: make(chan net.Conn), closed: make(chan struct{}),
		conns: map[*streamConn]struct{}{},
	}
}

func (l *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *streamLayer) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// closeAll closes the listener and every accepted connection, so that raft's connection
// handlers end even when the peer keeps its side open.
func (l *streamLayer) closeAll() {
	_ = l.Close()
	l.mu.Lock()
	conns := l.conns
	l.conns = map[*streamConn]struct{}{}
	l.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

func (l *streamLayer) Addr() net.Addr { return grpcAddr(l.addr) }

func (l *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-l.closed:
		return nil, net.ErrClosed
	default:
	}
	client, err := l.clients.get(string(address))
	if err != nil {
		return nil, err
	}
	// The stream lives as long as the connection; only Close (or a missed write deadline)
	// cancels it.
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		s   kvpb.Cluster_RaftStreamClient
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := client.RaftStream(ctx)
		done <- result{s, err}
	}()
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case r := <-done:
		if r.err != nil {
			cancel()
			return nil, r.err
		}
		return newStreamConn(r.s, cancel, grpcAddr(l.addr), grpcAddr(address)), nil
	case <-timer:
		cancel()
		return nil, os.ErrDeadlineExceeded
	}
}

// serve hands one incoming RaftStream to raft and blocks until the connection is closed.
func (l *streamLayer) serve(stream kvpb.Cluster_RaftStreamServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	c := newStreamConn(stream, cancel, grpcAddr(l.addr), grpcAddr("peer"))
	defer c.Close()
	l.mu.Lock()
	l.conns[c] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
	}()
	select {
	case l.accept <- c:
	case <-l.closed:
		return errShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-c.closed:
	case <-ctx.Done():
	}
	return nil
}

type grpcAddr string

func eofOr(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return io.EOF
	}
	return err
}

func (a grpcAddr) Network() string { return "grpc" }
func (a grpcAddr) String() string  { return string(a) }

// frameStream is what the client and server sides of RaftStream have in common.
type frameStream interface {
	Send(*kvpb.RaftFrame) error
	Recv() (*kvpb.RaftFrame, error)
}

// streamConn is a net.Conn over a RaftStream. Raft uses a connection from one goroutine at a
// time for writes and one for reads, which is all this supports; Close and the deadline
// setters may be called concurrently with either.
type streamConn struct {
	stream        frameStream
	cancel        context.CancelFunc
	local, remote net.Addr

	recv    chan []byte
	recvErr error // set before recv is closed
	buf     []byte

	mu            sync.Mutex
	readDeadline  time.Time
	writeDeadline time.Time

	closed    chan struct{}
	closeOnce sync.Once
}

func newStreamConn(s frameStream, cancel context.CancelFunc, local, remote net.Addr) *streamConn {
	c := &streamConn{
		stream: s, cancel: cancel, local: local, remote: remote,
		recv: make(chan []byte), closed: make(chan struct{}),
	}
	go c.recvLoop()
	return c
}

// recvLoop ends when the stream does: Close cancels the stream's context.
func (c *streamConn) recvLoop() {
	defer close(c.recv)
	for {
		f, err := c.stream.Recv()
		if err != nil {
			c.recvErr = err
			return
		}
		if len(f.GetData()) == 0 {
			continue
		}
		select {
		case c.recv <- f.GetData():
		case <-c.closed:
			c.recvErr = net.ErrClosed
			return
		}
	}
}

func (c *streamConn) Read(p []byte) (int, error) {
	if len(c.buf) == 0 {
		c.mu.Lock()
		dl := c.readDeadline
		c.mu.Unlock()
		var timer <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timer = t.C
		}
		select {
		case b, ok := <-c.recv:
			if !ok {
				if errors.Is(c.recvErr, net.ErrClosed) {
					return 0, net.ErrClosed
				}
				return 0, eofOr(c.recvErr)
			}
			c.buf = b
		case <-timer:
			return 0, os.ErrDeadlineExceeded
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

func (c *streamConn) Write(p []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	c.mu.Lock()
	dl := c.writeDeadline
	c.mu.Unlock()
	if !dl.IsZero() {
		d := time.Until(dl)
		if d <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		// A send blocked by flow control past the deadline kills the connection; raft then
		// drops it from its pool and dials again.
		t := time.AfterFunc(d, func() { _ = c.Close() })
		defer t.Stop()
	}
	// Send may keep the slice until it is marshalled; raft reuses its buffer.
	data := append([]byte(nil), p...)
	if err := c.stream.Send(&kvpb.RaftFrame{Data: data}); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *streamConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.cancel()
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr  { return c.local }
func (c *streamConn) RemoteAddr() net.Addr { return c.remote }

func (c *streamConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDeadline, c.writeDeadline = t, t
	c.mu.Unlock()
	return nil
}

func (c *streamConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDeadline = t
	c.mu.Unlock()
	return nil
}

func (c *streamConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.writeDeadline = t
	c.mu.Unlock()
	return nil
}
