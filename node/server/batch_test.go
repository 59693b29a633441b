package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"ringkv/internal/eventually"
	"ringkv/internal/storetest"
	"ringkv/node/auth"
	"ringkv/node/hlc"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
)

// methodCounter counts finished RPCs by method (an RPCObserver).
type methodCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *methodCounter) ObserveRPC(method string, _ codes.Code, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int{}
	}
	m.n[method]++
}

func (m *methodCounter) count(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[method]
}

// gate blocks the writes of one key in a real Local until released: the stand-in for a write
// held on a stripe lock or a slow disk, which a real store cannot be made to do on demand.
type gate struct {
	replica.Replica
	key     []byte
	entered chan struct{} // receives when a write of key is blocked
	release chan struct{}
}

func (g *gate) Write(ctx context.Context, key []byte, rec store.Record, vid ring.ViewID) (bool, error) {
	if bytes.Equal(key, g.key) {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		select {
		case <-g.release:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return g.Replica.Write(ctx, key, rec, vid)
}

// batchServer is a Replica service served by NewGRPC (the interceptor chain and its auth
// rule) on 127.0.0.1, that a test can stop and start again on the same address.
type batchServer struct {
	t      *testing.T
	deps   ReplicaDeps
	secret string
	obs    *methodCounter
	addr   string

	srv  *grpc.Server
	done chan struct{}
}

func startBatchServer(t *testing.T, d ReplicaDeps, secret string) *batchServer {
	t.Helper()
	if d.View == nil {
		d.View = func() *ring.View { return nil }
	}
	b := &batchServer{t: t, deps: d, secret: secret, obs: &methodCounter{}, addr: "127.0.0.1:0"}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *batchServer) start() {
	b.t.Helper()
	ln, err := net.Listen("tcp", b.addr)
	if err != nil {
		b.t.Fatalf("listen: %v", err)
	}
	b.addr = ln.Addr().String()
	b.srv, _ = NewGRPC(GRPCConfig{Logger: slog.New(slog.DiscardHandler), Secret: b.secret, Observer: b.obs})
	kvpb.RegisterReplicaServer(b.srv, NewReplica(b.deps))
	b.done = make(chan struct{})
	go func(srv *grpc.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln)
	}(b.srv, b.done)
}

func (b *batchServer) stop() {
	if b.srv != nil {
		b.srv.Stop()
		<-b.done
		b.srv = nil
	}
}

// remote dials the server and returns a batching Remote; both close at the test's end.
func (b *batchServer) remote(t *testing.T, secret string) (*replica.Remote, *grpc.ClientConn) {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if secret != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.Secret(secret)))
	}
	conn, err := grpc.NewClient(b.addr, opts...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	r := replica.NewRemote(conn, nil)
	t.Cleanup(func() {
		r.Close()
		conn.Close()
	})
	return r, conn
}

func batchCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Reads and writes through a Remote go over the Batch stream, authorized by the cluster
// secret once per stream: many concurrent requests, not one unary call, and a client with the
// wrong secret gets nothing through.
func TestBatchRemoteUsesStream(t *testing.T) {
	ctx := batchCtx(t)
	st := storetest.Open(t)
	srv := startBatchServer(t, ReplicaDeps{Local: replica.NewLocal(st, nil)}, "s3cret")
	r, _ := srv.remote(t, "s3cret")

	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			key := fmt.Appendf(nil, "k%03d", i)
			applied, err := r.Write(ctx, key, store.Record{TS: uint64(1000 + i), Value: key}, ring.ViewID{})
			if err != nil || !applied {
				errs <- fmt.Errorf("write %s: applied %v, err %v", key, applied, err)
				return
			}
			rec, found, err := r.Read(ctx, key)
			if err != nil || !found || rec.TS != uint64(1000+i) || !bytes.Equal(rec.Value, key) {
				errs <- fmt.Errorf("read %s: got %+v found %v err %v, want ts %d", key, rec, found, err, 1000+i)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		key := fmt.Appendf(nil, "k%03d", i)
		rec, found, err := st.Get(ring.Token(key), key)
		if err != nil || !found || rec.TS != uint64(1000+i) {
			t.Errorf("store has %s = %+v found %v err %v, want ts %d", key, rec, found, err, 1000+i)
		}
	}
	if got := srv.obs.count("/ringkv.Replica/Write") + srv.obs.count("/ringkv.Replica/Read"); got != 0 {
		t.Errorf("got %d unary Read/Write calls, want 0: every request goes over the stream", got)
	}

	bad, _ := srv.remote(t, "wrong")
	_, err := bad.Write(ctx, []byte("intruder"), store.Record{TS: 5, Value: []byte("x")}, ring.ViewID{})
	if !errors.Is(err, replica.ErrReplicaUnavailable) {
		t.Errorf("write with the wrong secret: got %v, want a refusal (ErrReplicaUnavailable)", err)
	}
	if _, found, _ := st.Get(ring.Token([]byte("intruder")), []byte("intruder")); found {
		t.Error("a write with the wrong secret reached the store")
	}
}

// Without a secret, internal streams are accepted from ring members and loopback only: the
// member rule applies to Batch as it does to the unary calls.
func TestBatchMemberRule(t *testing.T) {
	ic := interceptors{member: func(net.IP) bool { return false }}
	ctx := context.Background() // no peer: neither loopback nor a member
	for _, m := range []string{"/ringkv.Replica/Batch", "/ringkv.Replica/Write"} {
		if err := ic.authorize(ctx, m); status.Code(err) != codes.PermissionDenied {
			t.Errorf("authorize(%s) from a non-member: got %v, want PermissionDenied", m, err)
		}
	}
}

// A batch whose requests partly fail acknowledges exactly those whose records were applied:
// in one BatchRequest, records stamped too far ahead of the replica's clock are refused (a
// real hlc refusal), an empty key is refused, and the others are applied and acknowledged.
func TestBatchPartialFailure(t *testing.T) {
	ctx := batchCtx(t)
	st := storetest.Open(t)
	clock := hlc.New(nil, hlc.MaxOffset(500*time.Millisecond))
	srv := startBatchServer(t, ReplicaDeps{Local: replica.NewLocal(st, nil), Clock: clock}, "")
	_, conn := srv.remote(t, "")
	stream, err := kvpb.NewReplicaClient(conn).Batch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ahead := hlc.New(func() time.Time { return time.Now().Add(time.Hour) })
	now := hlc.New(nil)
	const n = 64
	req := &kvpb.BatchRequest{}
	refused := map[uint64]bool{}
	for i := range n {
		key := fmt.Appendf(nil, "p%02d", i)
		ts := now.Now()
		switch i % 4 {
		case 1:
			ts = ahead.Now()
			refused[uint64(i)] = true
		case 3:
			key = nil
			refused[uint64(i)] = true
		}
		req.Items = append(req.Items, &kvpb.BatchItem{Id: uint64(i), TimeoutNanos: int64(10 * time.Second), Op: &kvpb.BatchItem_Write{
			Write: &kvpb.WriteRequest{Key: key, Record: &kvpb.Record{Timestamp: ts, Value: []byte("v")}},
		}})
	}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]*kvpb.BatchResult{}
	for len(got) < n {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("recv after %d results: %v", len(got), err)
		}
		for _, r := range resp.GetResults() {
			if got[r.GetId()] != nil {
				t.Fatalf("result %d twice", r.GetId())
			}
			got[r.GetId()] = r
		}
	}
	for i := range uint64(n) {
		r := got[i]
		if r == nil {
			t.Fatalf("no result for %d", i)
		}
		key := fmt.Appendf(nil, "p%02d", i)
		_, stored, err := st.Get(ring.Token(key), key)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case refused[i]:
			if r.GetWrite() != nil {
				t.Errorf("item %d: acknowledged, want refused", i)
			}
			if i%4 == 1 && stored {
				t.Errorf("item %d: refused record reached the store", i)
			}
			var status *kvpb.BatchResult_Status
			if s, ok := r.GetResult().(*kvpb.BatchResult_Status); ok {
				status = s
			}
			if status == nil {
				t.Errorf("item %d: no status", i)
			}
		default:
			if !r.GetWrite().GetApplied() {
				t.Errorf("item %d: got %v, want applied", i, r.GetResult())
			}
			if !stored {
				t.Errorf("item %d: acknowledged but not in the store", i)
			}
		}
	}
	if got := clock.Rejected(); got != n/4 {
		t.Errorf("clock refused %d, want %d", got, n/4)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Error("stream still open after CloseSend")
	}
}

// The refusals of a partly failed batch reach the Remote's callers as the unary calls'
// errors do: a clock-offset refusal as hlc.ErrClockOffset, while the others of the batch
// succeed.
func TestBatchRemoteRefusals(t *testing.T) {
	ctx := batchCtx(t)
	st := storetest.Open(t)
	clock := hlc.New(nil, hlc.MaxOffset(500*time.Millisecond))
	srv := startBatchServer(t, ReplicaDeps{Local: replica.NewLocal(st, nil), Clock: clock}, "")
	r, _ := srv.remote(t, "")
	ahead := hlc.New(func() time.Time { return time.Now().Add(time.Hour) })
	now := hlc.New(nil)
	var wg sync.WaitGroup
	var applied, refused atomic.Int64
	for i := range 100 {
		wg.Go(func() {
			key := fmt.Appendf(nil, "r%03d", i)
			ts, far := now.Now(), i%2 == 0
			if far {
				ts = ahead.Now()
			}
			ok, err := r.Write(ctx, key, store.Record{TS: ts, Value: []byte("v")}, ring.ViewID{})
			switch {
			case far && errors.Is(err, hlc.ErrClockOffset):
				refused.Add(1)
			case !far && err == nil && ok:
				applied.Add(1)
			default:
				t.Errorf("write %s (far ahead %v): applied %v err %v", key, far, ok, err)
			}
		})
	}
	wg.Wait()
	if applied.Load() != 50 || refused.Load() != 50 {
		t.Errorf("got %d applied and %d refused, want 50 and 50", applied.Load(), refused.Load())
	}
}

// One request that blocks in the store holds none of the others sharing its stream, and a
// request whose deadline passes returns DeadlineExceeded at once; its late answer is dropped.
func TestBatchSlowRequestAndDeadline(t *testing.T) {
	ctx := batchCtx(t)
	st := storetest.Open(t)
	g := &gate{Replica: replica.NewLocal(st, nil), key: []byte("slow"), entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := startBatchServer(t, ReplicaDeps{Local: g}, "")
	r, _ := srv.remote(t, "")

	slow := make(chan error, 1)
	go func() {
		_, err := r.Write(ctx, []byte("slow"), store.Record{TS: 10, Value: []byte("s")}, ring.ViewID{})
		slow <- err
	}()
	select {
	case <-g.entered:
	case <-ctx.Done():
		t.Fatal("slow write never reached the store")
	}
	// Others on the same stream finish while it is blocked (else this test times out).
	for i := range 50 {
		key := fmt.Appendf(nil, "fast%02d", i)
		if _, err := r.Write(ctx, key, store.Record{TS: 10, Value: []byte("f")}, ring.ViewID{}); err != nil {
			t.Fatalf("write %s beside a blocked one: %v", key, err)
		}
	}
	// A request with a short deadline behind the same gate returns DeadlineExceeded.
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := r.Write(dctx, []byte("slow"), store.Record{TS: 11, Value: []byte("d")}, ring.ViewID{})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("write past its deadline: got %v, want DeadlineExceeded", err)
	}
	close(g.release)
	if err := <-slow; err != nil {
		t.Errorf("slow write: %v", err)
	}
	// The stream still serves after dropping the late answer.
	if _, found, err := r.Read(ctx, []byte("slow")); err != nil || !found {
		t.Errorf("read after the slow write: found %v err %v", found, err)
	}
}

// A stream that breaks fails the requests in flight on it with Unavailable — the evidence of
// death a peer's breaker counts, as a unary call to a stopped peer gives — and the next
// request, once the peer is back, opens a new stream. The write acknowledged before the break
// is on disk.
func TestBatchStreamBreak(t *testing.T) {
	ctx := batchCtx(t)
	st := storetest.Open(t)
	g := &gate{Replica: replica.NewLocal(st, nil), key: []byte("held"), entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := startBatchServer(t, ReplicaDeps{Local: g}, "")
	r, _ := srv.remote(t, "")
	if _, err := r.Write(ctx, []byte("before"), store.Record{TS: 1, Value: []byte("b")}, ring.ViewID{}); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		_, err := r.Write(ctx, []byte("held"), store.Record{TS: 2, Value: []byte("h")}, ring.ViewID{})
		held <- err
	}()
	select {
	case <-g.entered:
	case <-ctx.Done():
		t.Fatal("held write never reached the store")
	}
	stopped := make(chan struct{})
	go func() { srv.stop(); close(stopped) }() // Stop waits for the handler, which the gate holds
	err := <-held
	close(g.release)
	<-stopped
	if !errors.Is(err, replica.ErrReplicaUnavailable) || status.Code(err) != codes.Unavailable {
		t.Fatalf("in-flight write on a broken stream: got %v, want Unavailable", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("in-flight write waited for its deadline: %v", err)
	}
	srv.start()
	eventually.Succeeds(t, 15*time.Second, func() error {
		_, err := r.Write(ctx, []byte("after"), store.Record{TS: 3, Value: []byte("a")}, ring.ViewID{})
		return err
	})
	for _, k := range []string{"before", "after"} {
		if _, found, err := st.Get(ring.Token([]byte(k)), []byte(k)); err != nil || !found {
			t.Errorf("acknowledged write %s: found %v err %v", k, found, err)
		}
	}
}
