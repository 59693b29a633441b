package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"ringkv/internal/eventually"
)

// TestConnLimit: at the limit, an HTTP port makes room by closing its oldest idle
// connection, so a new client is answered; a port without idle ones (gRPC: no ConnState)
// refuses the excess at once rather than queueing it.
func TestConnLimit(t *testing.T) {
	t.Run("http evicts idle", func(t *testing.T) {
		l := NewConnLimit(2)
		l.Refuse = RefuseHTTP
		addr := serveHTTP(t, l)
		idle := []net.Conn{dial(t, addr), dial(t, addr)}
		eventuallyOpen(t, l, 2)
		code := get(t, addr)
		if code != http.StatusOK {
			t.Fatalf("GET past the limit: got %d, want 200", code)
		}
		// The oldest idle connection was closed to make room.
		idle[0].SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := idle[0].Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read on the evicted idle connection: got %v, want EOF", err)
		}
	})
	t.Run("no idle refuses", func(t *testing.T) {
		l := NewConnLimit(1)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lln := l.Listener(ln)
		t.Cleanup(func() { lln.Close() })
		held := make(chan net.Conn, 4)
		go func() {
			for {
				c, err := lln.Accept()
				if err != nil {
					return
				}
				held <- c
			}
		}()
		dial(t, ln.Addr().String())
		held1 := <-held
		excess := dial(t, ln.Addr().String())
		excess.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		if _, err := excess.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read on the excess connection: got %v, want EOF", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("excess connection closed after %v, want at once", d)
		}
		held1.Close()
		dial(t, ln.Addr().String())
		(<-held).Close() // a place was free again: accepted
		if got := l.Open(); got != 0 {
			t.Fatalf("open connections: got %d, want 0", got)
		}
	})
}

func serveHTTP(t *testing.T, l *ConnLimit) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		ConnState: l.ConnState,
	}
	go srv.Serve(l.Listener(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func get(t *testing.T, addr string) int {
	t.Helper()
	c := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func eventuallyOpen(t *testing.T, l *ConnLimit, want int) {
	t.Helper()
	eventually.Succeeds(t, 5*time.Second, func() error {
		if got := l.Open(); got != want {
			return fmt.Errorf("open connections: got %d, want %d", got, want)
		}
		return nil
	})
}
