package test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"ringkv/internal/eventually"
	"ringkv/internal/syncbuf"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is one kvnode process.
type proc struct {
	id, grpc, http, admin, dir string
	flags                      []string            // extra kvnode flags
	cred                       *syscall.Credential // run as this user; nil: as the test
	advertise                  string              // the gRPC address peers reach it at (a proxy); "": grpc
	cmd                        *exec.Cmd
	log                        *logBuf
	done                       chan error
}

// logBuf is a process's output: written by exec's copying goroutine while a test may read
// it (a check of the log of a running node).
type logBuf = syncbuf.Buffer

// Ports handed out by freeAddr, so that one test binary never hands out a port twice.
var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// freeAddr returns a loopback address that was free a moment ago, for a kvnode process to
// bind. Its port is below Linux's ephemeral range (32768 and up): a port the kernel assigned
// to a probe would otherwise be handed to any outgoing connection of the busy test machine
// before the process binds it ("address already in use", seen in CI).
func freeAddr(t *testing.T) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if ports[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		ports[port] = true
		return l.Addr().String()
	}
	t.Fatalf("no free port in 20000-31999")
	return ""
}

func (p *proc) start(t *testing.T, bin, peers string) {
	t.Helper()
	p.log = &logBuf{}
	args := []string{"--id", p.id, "--data", p.dir, "--grpc", p.grpc, "--http", p.http, "--admin", p.admin,
		"--peers", peers, "--replicas", "3", "--vnodes", "32", "--replica-timeout", "500ms"}
	if p.advertise != "" {
		args = append(args, "--advertise", p.advertise)
	}
	p.cmd = exec.Command(bin, append(args, p.flags...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if p.cred != nil {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.id, err)
	}
	p.done = make(chan error, 1)
	go func(cmd *exec.Cmd, done chan error) { done <- cmd.Wait() }(p.cmd, p.done)
}

var client = &http.Client{Timeout: 5 * time.Second}

func request(method, url string, body []byte) (int, string, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitFor polls cond until it holds or d passes; a failure names what was awaited.
func waitFor(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	eventually.Succeeds(t, d, func() error {
		if err := cond(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// TestKillNineUnderWrites: three kvnode processes under a steady stream of ack=2 PUTs;
// one is killed with SIGKILL and restarted on the same data directory; afterwards every
// acknowledged write is readable with the default quorum through every node.
func TestKillNineUnderWrites(t *testing.T) {
	t.Parallel()
	bin := buildBins(t).kvnode
	base := t.TempDir()
	ps := make([]*proc, 3)
	var peers []string
	for i := range ps {
		ps[i] = &proc{id: fmt.Sprintf("n%d", i+1), grpc: freeAddr(t), http: freeAddr(t), admin: freeAddr(t)}
		ps[i].dir = filepath.Join(base, ps[i].id)
		peers = append(peers, ps[i].id+"="+ps[i].grpc)
	}
	peerList := strings.Join(peers, ",")
	for _, p := range ps {
		p.start(t, bin, peerList)
	}
	t.Cleanup(func() {
		for _, p := range ps {
			p.terminate(t)
		}
	})
	for _, p := range ps {
		waitFor(t, 20*time.Second, p.id+" serving", func() error {
			code, body, err := request("PUT", "http://"+p.http+"/v0/entity?id=probe-"+p.id+"&ack=3", []byte("x"))
			if err != nil {
				return err
			}
			if code != http.StatusCreated {
				return fmt.Errorf("got %d %q, want 201", code, body)
			}
			return nil
		})
	}

	// The writer: unique keys, ack=2, round robin over the nodes; records what was acknowledged.
	var mu sync.Mutex
	acked := map[string]string{}
	attempts := 0
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for seq := 0; ctx.Err() == nil; seq++ {
				key := fmt.Sprintf("w%d-%d", w, seq)
				val := "value-" + key
				p := ps[(seq+w)%len(ps)]
				code, _, err := request("PUT", "http://"+p.http+"/v0/entity?id="+key+"&ack=2", []byte(val))
				mu.Lock()
				attempts++
				if err == nil && code == http.StatusCreated {
					acked[key] = val
				}
				mu.Unlock()
			}
		})
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	// 300 writes are the evidence sought, not a rate: the waits end as soon as they are in
	// (a second or two on a quiet machine; 283 in 10 s in a fresh-clone CI at load ~20).
	waitFor(t, time.Minute, "writes before the kill", func() error {
		if n := count(); n < 300 {
			return fmt.Errorf("%d acknowledged writes", n)
		}
		return nil
	})
	victim := ps[2]
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 %s: %v", victim.id, err)
	}
	<-victim.done
	before := count()
	waitFor(t, time.Minute, "writes while a node is down", func() error {
		if n := count(); n < before+300 {
			return fmt.Errorf("%d acknowledged writes since the kill", n-before)
		}
		return nil
	})
	victim.start(t, bin, peerList)
	before = count()
	waitFor(t, 20*time.Second, "writes after the restart through the restarted node", func() error {
		code, body, err := request("PUT", "http://"+victim.http+"/v0/entity?id=probe-back&ack=3", []byte("x"))
		if err != nil {
			return err
		}
		if code != http.StatusCreated {
			return fmt.Errorf("got %d %q", code, body)
		}
		if n := count(); n < before+300 {
			return fmt.Errorf("%d acknowledged writes since the restart", n-before)
		}
		return nil
	})
	stop()
	wg.Wait()
	t.Logf("%d of %d writes acknowledged", len(acked), attempts)

	missing := 0
	i := 0
	for key, val := range acked {
		p := ps[i%len(ps)]
		i++
		code, body, err := request("GET", "http://"+p.http+"/v0/entity?id="+key, nil)
		if err != nil || code != http.StatusOK || body != val {
			missing++
			if missing <= 10 {
				t.Errorf("GET %s via %s: got %d %q (err %v), want 200 %q", key, p.id, code, body, err, val)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged writes not readable with the default quorum", missing, len(acked))
	}
	if os.Getenv("RINGKV_TEST_VERBOSE") != "" {
		t.Logf("victim log:\n%s", victim.log)
	}
}
