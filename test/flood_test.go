package test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startOne starts a one-node cluster n1 from bin with flags and waits until /v0/status is 200.
// It is stopped with SIGTERM at the end of the test.
func startOne(t *testing.T, bin, dir string, flags ...string) *proc {
	t.Helper()
	p := &proc{id: "n1", grpc: freeAddr(t), http: freeAddr(t), admin: freeAddr(t), dir: dir, flags: append([]string{"--replicas", "1"}, flags...)}
	p.start(t, bin, "n1="+p.grpc)
	t.Cleanup(func() {
		stopProc(t, p)
		if t.Failed() {
			t.Logf("--- log of %s (last lines):\n%s", p.id, tail(p.log, 40))
		}
	})
	waitStatus(t, p, http.StatusOK)
	return p
}

// waitStatus waits until p's /v0/status answers code.
func waitStatus(t *testing.T, p *proc, code int) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%s /v0/status %d", p.id, code), func() error {
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("exited: %v\n%s", err, tail(p.log, 30))
		default:
		}
		got, body, err := request("GET", "http://"+p.http+"/v0/status", nil)
		if err != nil {
			return err
		}
		if got != code {
			return fmt.Errorf("got %d %q", got, body)
		}
		return nil
	})
}

// stopProc sends SIGTERM to p (if it still runs) and waits for it.
func stopProc(t *testing.T, p *proc) {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return
	default:
	}
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Errorf("%s exited with %v after SIGINT, want 0\n%s", p.id, err, tail(p.log, 40))
		}
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		err := <-p.done
		p.done <- err
		t.Errorf("%s did not exit within 20s of SIGINT\n%s", p.id, tail(p.log, 40))
	}
}

// TestFloodIdleConnections: a kvnode at an open-file limit of 1,024 with 1,100 idle HTTP
// connections opened against it still answers a normal client (new connections each),
// and is not out of files: it makes room by closing the oldest idle connections.
func TestFloodIdleConnections(t *testing.T) {
	t.Parallel()
	bin := buildBins(t).kvnode
	wrapper := filepath.Join(t.TempDir(), "kvnode-nofile-1024")
	script := "#!/bin/sh\nexec prlimit --nofile=1024:1024 " + bin + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p := startOne(t, wrapper, t.TempDir())

	var idle []net.Conn
	t.Cleanup(func() {
		for _, c := range idle {
			c.Close()
		}
	})
	for range 1100 {
		c, err := net.DialTimeout("tcp", p.http, 5*time.Second)
		if err != nil {
			t.Fatalf("dial idle connection %d: %v", len(idle), err)
		}
		idle = append(idle, c)
	}
	normal := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 50 {
		key := fmt.Sprintf("flood-%d", i)
		url := fmt.Sprintf("http://%s/v0/entity?id=%s", p.http, key)
		req, _ := http.NewRequest("PUT", url, strings.NewReader("v-"+key))
		resp, err := normal.Do(req)
		if err != nil {
			t.Fatalf("PUT %s with 1,100 idle connections open: %v", key, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT %s with 1,100 idle connections open: got %d, want 201", key, resp.StatusCode)
		}
		resp, err = normal.Get(url)
		if err != nil {
			t.Fatalf("GET %s with 1,100 idle connections open: %v", key, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "v-"+key {
			t.Fatalf("GET %s: got %d %q, want 200 %q", key, resp.StatusCode, b, "v-"+key)
		}
	}
	if strings.Contains(p.log.String(), "too many open files") {
		t.Fatalf("kvnode ran out of files:\n%s", tail(p.log, 20))
	}
}

// TestFloodSlowClients: a client that sends its body slowly, and an idle keep-alive
// client, are closed within their timeouts (--http-read-timeout, --idle-timeout).
func TestFloodSlowClients(t *testing.T) {
	bin := buildBins(t).kvnode
	p := startOne(t, bin, t.TempDir(), "--http-read-timeout", "1s", "--idle-timeout", "1s")
	closedWithin := func(c net.Conn, r *bufio.Reader, d time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		c.SetReadDeadline(start.Add(d))
		if _, err := io.Copy(io.Discard, r); err != nil {
			t.Fatalf("connection still open after %v: %v", d, err)
		}
		return time.Since(start)
	}

	slow, err := net.Dial("tcp", p.http)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "PUT /v0/entity?id=slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
	if d := closedWithin(slow, bufio.NewReader(slow), 5*time.Second); d > 4*time.Second {
		t.Fatalf("slow body closed after %v, want within ~1s", d)
	}

	ka, err := net.Dial("tcp", p.http)
	if err != nil {
		t.Fatal(err)
	}
	defer ka.Close()
	fmt.Fprintf(ka, "GET /v0/status HTTP/1.1\r\nHost: x\r\n\r\n")
	r := bufio.NewReader(ka)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("keep-alive GET: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if d := closedWithin(ka, r, 5*time.Second); d > 4*time.Second {
		t.Fatalf("idle keep-alive closed after %v, want within ~1s", d)
	}
}
