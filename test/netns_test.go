package test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
)

// netns is a network namespace joined to this host by a veth pair: the host's end has
// hostIP, the namespace's end nsIP (a /24), and the namespace's loopback is up.
type netns struct {
	name, hostIP, nsIP string
}

// newNetns creates a network namespace and its veth pair, removed at the end of the test.
// It skips the test when not root or without ip(8) (CI runs as root).
func newNetns(t *testing.T, tag string, subnet int) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (ip netns add); CI runs as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip(8) (iproute2) to create network namespaces")
	}
	// Names of this process's own: several test binaries may run at once.
	id := fmt.Sprintf("%d%s", os.Getpid()%100000, tag)
	n := &netns{
		name:   "ringkv-" + id,
		hostIP: fmt.Sprintf("10.%d.%d.1", subnet, os.Getpid()%250),
		nsIP:   fmt.Sprintf("10.%d.%d.2", subnet, os.Getpid()%250),
	}
	host, inside := "rkh"+id, "rkn"+id // at most 15 bytes
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", n.name)
	t.Cleanup(func() {
		// Deleting the namespace destroys its end of the pair, and with it the host's end.
		if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v %s", n.name, err, out)
		}
	})
	run("link", "add", host, "type", "veth", "peer", "name", inside)
	run("link", "set", inside, "netns", n.name)
	run("addr", "add", n.hostIP+"/24", "dev", host)
	run("link", "set", host, "up")
	run("-n", n.name, "addr", "add", n.nsIP+"/24", "dev", inside)
	run("-n", n.name, "link", "set", inside, "up")
	run("-n", n.name, "link", "set", "lo", "up")
	return n
}

// dial opens a TCP connection from inside the namespace: the socket is made on an OS thread
// that joined it (the thread is never returned to the Go scheduler; it ends with its
// goroutine).
func (n *netns) dial(ctx context.Context, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread's namespace is no longer the process's
		f, err := os.Open(filepath.Join("/var/run/netns", n.name))
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("setns %s: %w", n.name, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// replicaFrom is a Replica client whose connection starts inside n (nil: from this host).
func replicaFrom(t *testing.T, n *netns, addr string) kvpb.ReplicaClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if n != nil {
		opts = append(opts, grpc.WithContextDialer(n.dial))
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return kvpb.NewReplicaClient(conn)
}

// TestInternalRPCsFromMembersOnly: a kvnode without a cluster secret or TLS, listening on
// every address, whose ring holds n1 (itself) and n2 at the address of a network namespace
// ("member"). A Replica.Write from a second namespace ("stranger", another host address)
// is refused with PermissionDenied and not stored; the same write from the member's
// address is accepted and stored, as is one from loopback; the node said so at start.
func TestInternalRPCsFromMembersOnly(t *testing.T) {
	t.Parallel()
	member := newNetns(t, "m", 231)
	stranger := newNetns(t, "s", 232)
	bin := buildBins(t).kvnode

	grpcPort := strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
	p := &proc{id: "n1", grpc: "0.0.0.0:" + grpcPort, http: freeAddr(t), admin: freeAddr(t), dir: t.TempDir()}
	p.log = &logBuf{}
	p.cmd = exec.Command(bin, "--id", "n1", "--data", p.dir, "--grpc", p.grpc, "--advertise", "127.0.0.1:"+grpcPort,
		"--http", p.http, "--admin", p.admin, "--replicas", "2", "--vnodes", "8",
		"--peers", "n1=127.0.0.1:"+grpcPort+",n2="+member.nsIP+":"+grpcPort)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start n1: %v", err)
	}
	p.done = make(chan error, 1)
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		stopProc(t, p)
		if t.Failed() {
			t.Logf("--- log of n1 (last lines):\n%s", tail(p.log, 40))
		}
	})
	local := replicaFrom(t, nil, "127.0.0.1:"+grpcPort)
	// The node's epoch, asked from loopback (accepted: the rule lets loopback in).
	var epoch uint64
	waitFor(t, 30*time.Second, "n1 answers Replica.Read from loopback", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		rr, err := local.Read(ctx, &kvpb.ReadRequest{Key: []byte("probe")})
		if err != nil {
			return err
		}
		epoch = rr.GetEpoch()
		return nil
	})
	write := func(rc kvpb.ReplicaClient, key string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ts := uint64(time.Now().UnixMilli()) << 16
		_, err := rc.Write(ctx, &kvpb.WriteRequest{Key: []byte(key), Record: &kvpb.Record{Timestamp: ts, Value: []byte("v-" + key)}, Epoch: epoch})
		return err
	}
	stored := func(key string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rr, err := local.Read(ctx, &kvpb.ReadRequest{Key: []byte(key), Epoch: epoch})
		if err != nil {
			t.Fatalf("Replica.Read %s from loopback: %v", key, err)
		}
		return rr.GetFound() && string(rr.GetRecord().GetValue()) == "v-"+key
	}

	for _, tt := range []struct {
		name   string
		from   kvpb.ReplicaClient
		addr   string
		key    string
		refuse bool
	}{
		{"stranger", replicaFrom(t, stranger, stranger.hostIP+":"+grpcPort), stranger.nsIP, "from-stranger", true},
		{"member", replicaFrom(t, member, member.hostIP+":"+grpcPort), member.nsIP, "from-member", false},
		{"loopback", local, "127.0.0.1", "from-loopback", false},
	} {
		err := write(tt.from, tt.key)
		switch {
		case tt.refuse && status.Code(err) != codes.PermissionDenied:
			t.Errorf("Replica.Write from the %s (%s): got %v, want PermissionDenied", tt.name, tt.addr, err)
		case !tt.refuse && err != nil:
			t.Errorf("Replica.Write from the %s (%s): got %v, want accepted", tt.name, tt.addr, err)
		}
		if got := stored(tt.key); got == tt.refuse {
			t.Errorf("after the write from the %s: stored %t, want %t", tt.name, got, !tt.refuse)
		}
	}
	if want := "internal RPCs from ring members and loopback only"; !strings.Contains(p.log.String(), want) {
		t.Errorf("n1's log lacks %q: the rule is said at start", want)
	}
}
