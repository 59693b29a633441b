package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"ringkv/internal/eventually"
	"ringkv/internal/syncbuf"
	"ringkv/node/ring"
	"ringkv/node/store"
)

// storeCoordinator keeps the last value put under each key.
type storeCoordinator struct {
	mu     sync.Mutex
	values map[string][]byte
}

func (s *storeCoordinator) Get(_ context.Context, key []byte, _, _ int) (store.Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[string(key)]
	return store.Record{TS: 1, Value: v}, ok, nil
}

func (s *storeCoordinator) Put(_ context.Context, key, value []byte, _, _ int) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[string(key)] = bytes.Clone(value) // the server reuses value's buffer
	return 1, nil
}

func (s *storeCoordinator) Delete(_ context.Context, key []byte, _, _ int) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.values, string(key))
	return 1, nil
}

// serveAPI serves srv (NewHTTPServer's) on a loopback port until the test ends, then shuts
// it down (a no-op after a shutdown of the test's own), and returns its address; an error
// of Serve fails the test.
func serveAPI(t *testing.T, srv *fasthttp.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Shutdown()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestHTTPServerBodies: the client API's server takes a body of a known length and a chunked
// one up to the value limit, answers 413 past it with the reason (for a known length without
// reading the body), honours 100-continue, and answers 431 for a header past its bound.
func TestHTTPServerBodies(t *testing.T) {
	view := readyView(t)
	const limit = 1000
	sc := &storeCoordinator{values: map[string][]byte{}}
	srv := NewHTTPServer(Data{Coordinator: sc, View: func() *ring.View { return view }, MaxValueSize: limit},
		HTTPConfig{ReadTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second, MaxHeaderBytes: 4 << 10})
	addr := serveAPI(t, srv)
	base := "http://" + addr + "/v0/entity?id="
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	put := func(key string, body io.Reader, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, base+key, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("PUT %s: %v", key, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// chunked: a body of unknown length (no Content-Length), sent as chunks.
	chunked := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) }
	at, over := strings.Repeat("v", limit), strings.Repeat("w", limit+1)
	for _, tc := range []struct {
		name, key string
		body      io.Reader
		header    map[string]string
		code      int
		reason    string
		stored    string
	}{
		{"known length at the limit", "a", strings.NewReader(at), nil, 201, "", at},
		{"known length over the limit", "b", strings.NewReader(over), nil, 413, "body is 1001 bytes, limit 1000", ""},
		{"chunked at the limit", "c", chunked(at), nil, 201, "", at},
		{"chunked over the limit", "d", chunked(over), nil, 413, "body over the limit of 1000 bytes", ""},
		{"100-continue", "e", strings.NewReader("cont"), map[string]string{"Expect": "100-continue"}, 201, "", "cont"},
		{"multipart content type is still raw bytes", "f", strings.NewReader("--x\r\n"), map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, 201, "", "--x\r\n"},
		{"empty body", "g", strings.NewReader(""), nil, 201, "", ""},
		{"header over the bound", "h", strings.NewReader("x"), map[string]string{"X-Big": strings.Repeat("h", 5<<10)}, 431, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := put(tc.key, tc.body, tc.header)
			if code != tc.code || !strings.Contains(body, tc.reason) {
				t.Fatalf("got %d %q, want %d with %q", code, body, tc.code, tc.reason)
			}
			sc.mu.Lock()
			v, ok := sc.values[tc.key]
			sc.mu.Unlock()
			if want := tc.code == 201; ok != want || string(v) != tc.stored {
				t.Errorf("stored %v %d bytes, want %v %d bytes", ok, len(v), want, len(tc.stored))
			}
		})
	}

	// A GET answers the value as raw bytes; a HEAD of the status answers without a body.
	resp, err := client.Get(base + "a")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != at || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("GET: got %d %s %d bytes, want 200 application/octet-stream %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(b), len(at))
	}
	resp, err = client.Head("http://" + addr + "/v0/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("HEAD /v0/status: got %d, want 200", resp.StatusCode)
	}
}

// TestHTTPServerLogsNoRequest: the server's own error lines (a request it could not parse)
// say what went wrong without quoting the request, whose line holds a key.
func TestHTTPServerLogsNoRequest(t *testing.T) {
	view := readyView(t)
	var logs syncbuf.Buffer
	srv := NewHTTPServer(Data{Coordinator: &storeCoordinator{values: map[string][]byte{}}, View: func() *ring.View { return view },
		MaxValueSize: 1000, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, HTTPConfig{ReadTimeout: 10 * time.Second})
	c, err := net.Dial("tcp", serveAPI(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "PUT /v0/entity?id=secret-key HTTP/1.1\r\nHost: x\r\nContent-Length: secret-value\r\n\r\n")
	answer, _ := io.ReadAll(c) // the server answers 400 and closes
	if !bytes.HasPrefix(answer, []byte("HTTP/1.1 400")) {
		t.Errorf("answer %q, want 400", answer)
	}
	eventually.Succeeds(t, 5*time.Second, func() error {
		if !strings.Contains(logs.String(), "http server") {
			return fmt.Errorf("no error line logged: %q", logs.String())
		}
		return nil
	})
	if strings.Contains(logs.String(), "secret") {
		t.Errorf("the log quotes the request:\n%s", logs.String())
	}
}

// blockingCoordinator holds every Put until release is closed.
type blockingCoordinator struct {
	storeCoordinator
	started chan struct{}
	release chan struct{}
}

func (b *blockingCoordinator) Put(ctx context.Context, key, value []byte, ack, from int) (uint64, error) {
	b.started <- struct{}{}
	<-b.release
	return b.storeCoordinator.Put(ctx, key, value, ack, from)
}

// TestHTTPServerDrain: a shutdown lets the request in flight finish and answers it with
// Connection: close, then returns; new connections are refused from its start.
func TestHTTPServerDrain(t *testing.T) {
	view := readyView(t)
	bc := &blockingCoordinator{storeCoordinator: storeCoordinator{values: map[string][]byte{}},
		started: make(chan struct{}, 1), release: make(chan struct{})}
	srv := NewHTTPServer(Data{Coordinator: bc, View: func() *ring.View { return view }, MaxValueSize: 1000},
		HTTPConfig{ReadTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second})
	addr := serveAPI(t, srv)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "PUT /v0/entity?id=k HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nv")
	<-bc.started // the PUT is in the coordinator

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- srv.ShutdownWithContext(ctx)
	}()
	eventually.Succeeds(t, 5*time.Second, func() error {
		if nc, err := net.Dial("tcp", addr); err == nil {
			nc.Close()
			return fmt.Errorf("a new connection was accepted while draining")
		}
		return nil
	})
	select {
	case err := <-shut:
		t.Fatalf("shutdown returned (%v) with a request in flight", err)
	default:
	}
	close(bc.release)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the request in flight got no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !resp.Close {
		t.Errorf("in flight: got %d, Connection: close %v; want 201 and close", resp.StatusCode, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if string(bc.values["k"]) != "v" {
		t.Errorf("stored %q, want v", bc.values["k"])
	}
}
