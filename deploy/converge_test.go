package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"ringkv/ctl/cli"
	"ringkv/internal/replicatest"
	"ringkv/node/certs"
	"ringkv/proto/kvpb"
)

// Convergence after a drill (with hints and Merkle repair): every replica holds
// every write the bench acknowledged, checked on each node's own store (Replica.StreamRange
// of the whole ring, a local scan: no client read, so no read reconciliation), within
// convergeTimeout of the heal; then a kvctl repair --dry-run finds no Merkle leaf that
// differs between any two replicas. What closes the gap is left to the cluster: durable
// hints, replayed when the peer answers again, and background repair every
// composeRepairInterval (set for the test's cluster only; an operator's default is 1h).
const (
	convergeTimeout       = 60 * time.Second
	composeRepairInterval = "10s"
)

// watcher samples every node's NodeInfo while a drill runs, to tell what closed the gap:
// hints a holder handed over (the drops of its per-peer queue, less the hints it dropped)
// and keys streamed by repair sessions (background or kvctl) that started since the fault.
type watcher struct {
	c    *composeCluster
	f    *cli.Factory
	stop func()
	done chan struct{}
	once sync.Once

	mu        sync.Mutex
	queued    map[string]uint64 // "holder>peer" -> hints queued at the last sample
	dropped   map[string]uint64 // holder -> hints_dropped at the last sample
	delivered uint64
	drops     uint64
	peak      uint64                          // most hints queued cluster-wide at one sample
	sessions  map[string]*kvpb.RepairProgress // "coordinator/id" -> latest sample
	// emptied is the first sample since the last queued hint that found every queue empty.
	emptied time.Time
}

// watch starts sampling every 500ms until the watcher's stop.
func (c *composeCluster) watch(t *testing.T) *watcher {
	ios, _, _, _ := cli.Test()
	f := cli.NewFactory(ios)
	f.CertsDir = c.certs
	ctx, stop := context.WithCancel(context.Background())
	w := &watcher{c: c, f: f, stop: stop, done: make(chan struct{}),
		queued: map[string]uint64{}, dropped: map[string]uint64{}, sessions: map[string]*kvpb.RepairProgress{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			w.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *watcher) close() {
	w.once.Do(func() {
		w.stop()
		<-w.done
		w.f.Close()
	})
}

// sample reads every node's NodeInfo; a node that does not answer (down, cut off, paused)
// keeps its last sample.
func (w *watcher) sample(ctx context.Context) {
	for i := 1; i <= 3; i++ {
		c, err := w.f.Admin(w.c.grpcAddr(i))
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		info, err := c.NodeInfo(cctx, &kvpb.NodeInfoRequest{})
		cancel()
		if err != nil {
			continue
		}
		w.mu.Lock()
		holder := info.GetId()
		for _, q := range info.GetHints() {
			k := holder + ">" + q.GetPeer()
			if prev := w.queued[k]; q.GetHints() < prev {
				w.delivered += prev - q.GetHints()
			}
			w.queued[k] = q.GetHints()
		}
		// A peer whose queue emptied may be absent from the list.
		for k, prev := range w.queued {
			if strings.HasPrefix(k, holder+">") && !hasPeer(info, strings.TrimPrefix(k, holder+">")) {
				w.delivered += prev
				w.queued[k] = 0
			}
		}
		if d := info.GetHintsDropped(); d > w.dropped[holder] {
			w.drops += d - w.dropped[holder]
			w.dropped[holder] = d
		} else {
			w.dropped[holder] = d // restarted: counts from zero again
		}
		if p := info.GetRepair(); p != nil && p.GetId() != 0 {
			w.sessions[fmt.Sprintf("%s/%d", p.GetCoordinator(), p.GetId())] = p
		}
		w.mu.Unlock()
	}
	// Hints queued anywhere (a node that did not answer counts with its last sample).
	w.mu.Lock()
	defer w.mu.Unlock()
	var total uint64
	for _, n := range w.queued {
		total += n
	}
	w.peak = max(w.peak, total)
	if total > 0 {
		w.emptied = time.Time{}
	} else if w.emptied.IsZero() && w.peak > 0 {
		w.emptied = time.Now()
	}
}

func hasPeer(info *kvpb.NodeInfoResponse, peer string) bool {
	for _, q := range info.GetHints() {
		if q.GetPeer() == peer {
			return true
		}
	}
	return false
}

// closedBy is what the watcher saw: hints handed over (and dropped), the hints still queued,
// and the repair sessions that started at or after since, with the keys they repaired.
type closedBy struct {
	hintsPeak, hintsDelivered, hintsDropped, hintsQueued uint64
	sessions, keysRepaired, leavesMismatched             uint64
	// emptied is when the watcher found every hint queue empty for good (zero: no hint
	// was queued, or some still are).
	emptied time.Time
}

func (w *watcher) closedBy(since time.Time) closedBy {
	w.mu.Lock()
	defer w.mu.Unlock()
	cb := closedBy{hintsPeak: w.peak, hintsDropped: w.drops, emptied: w.emptied}
	if w.delivered > w.drops {
		cb.hintsDelivered = w.delivered - w.drops
	}
	for _, n := range w.queued {
		cb.hintsQueued += n
	}
	for _, p := range w.sessions {
		if p.GetStartedUnix() < since.Unix() || p.GetPlan().GetRequest().GetDryRun() {
			continue
		}
		cb.sessions++
		for _, pr := range p.GetPairs() {
			cb.keysRepaired += pr.GetKeysToA() + pr.GetKeysToB()
			cb.leavesMismatched += pr.GetLeavesMismatched()
		}
	}
	return cb
}

// acked reads a kvctl bench --record file: every acknowledged value of every key ("" for an
// acknowledged delete).
func acked(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r struct {
			Key     string `json:"key"`
			Value   []byte `json:"value_base64"`
			Deleted bool   `json:"deleted"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("record %s: %w", path, err)
		}
		out[r.Key] = append(out[r.Key], string(r.Value))
	}
	return out, sc.Err()
}

// heldBy scans node i's own store over the whole ring (a replica-local read with the node
// certificate, as a peer streams a range): every record it holds, by key ("" for a
// tombstone).
func (c *composeCluster) heldBy(ctx context.Context, i int) (map[string]string, error) {
	cfg, err := certs.Client(c.certs, certs.NodeCert, certs.NodeKey)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(c.grpcAddr(i), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return replicatest.Held(ctx, conn)
}

// missing counts, per node, the acknowledged keys it does not hold with one of their
// acknowledged values (with 3 nodes and 3 replicas, every node holds every key).
func (c *composeCluster) missing(ctx context.Context, ack map[string][]string) ([3]int, error) {
	var miss [3]int
	for i := 1; i <= 3; i++ {
		held, err := c.heldBy(ctx, i)
		if err != nil {
			return miss, fmt.Errorf("scan n%d: %w", i, err)
		}
		for k, vs := range ack {
			v, ok := held[k]
			if !ok || !containsString(vs, v) {
				miss[i-1]++
			}
		}
	}
	return miss, nil
}

func containsString(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// dryRun runs kvctl repair --dry-run through node i: the replica pairs compared and the
// Merkle leaves that differ between them, summed over the session.
func (c *composeCluster) dryRun(ctx context.Context, i int) (compared, mismatched uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	code, stdout, stderr := kvctlCtx(ctx, "--addr", c.grpcAddr(i), "--certs-dir", c.certs, "repair", "--dry-run", "-o", "json")
	if code != 0 {
		return 0, 0, fmt.Errorf("kvctl repair --dry-run via n%d: exit %d: %s", i, code, lastLine(stderr))
	}
	var res struct {
		State string `json:"state"`
		Pairs []struct {
			LeavesCompared   uint64 `json:"leaves_compared"`
			LeavesMismatched uint64 `json:"leaves_mismatched"`
		} `json:"pairs"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		return 0, 0, fmt.Errorf("kvctl repair --dry-run -o json: %w\n%s", err, stdout)
	}
	if res.State != kvpb.RepairState_REPAIR_STATE_DONE.String() || len(res.Pairs) != 3 {
		return 0, 0, fmt.Errorf("kvctl repair --dry-run via n%d: state %s, %d replica pairs, want done and 3", i, res.State, len(res.Pairs))
	}
	for _, p := range res.Pairs {
		compared += p.LeavesCompared
		mismatched += p.LeavesMismatched
	}
	return compared, mismatched, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// converge polls, once a second until convergeTimeout after the drill's heal, until every
// node holds every acknowledged write of the bench's record, then until a dry-run repair
// finds no differing leaf between any two replicas (through n1, n2, n3 in turn, so that no
// node's background repair is starved by the dry runs). It logs the time from heal to each,
// the hints handed over and the keys background repair streamed; it fails the test when the
// deadline passes first.
func (b *bench) converge(t *testing.T, c *composeCluster) {
	t.Helper()
	ack, err := acked(b.record)
	if err != nil {
		t.Fatalf("%s: %v", b.name, err)
	}
	if len(ack) == 0 {
		t.Fatalf("%s: the bench acknowledged no write: nothing to check", b.name)
	}
	healed := b.t0.Add(b.marks["healed"])
	deadline := healed.Add(convergeTimeout)
	ctx := t.Context()
	poll := func(what string, fn func() error) (time.Duration, bool) {
		for {
			err := fn()
			if err == nil {
				return time.Since(healed), true
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: %s not within %v of the heal: %v", b.name, what, convergeTimeout, err)
				return 0, false
			}
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return 0, false
			}
		}
	}
	first := true
	held, ok := poll("every acknowledged key on every replica", func() error {
		miss, err := c.missing(ctx, ack)
		if err != nil {
			return err
		}
		if first {
			first = false
			t.Logf("%s: first check %.1fs after the heal: acknowledged keys missing on n1, n2, n3: %v of %d",
				b.name, time.Since(healed).Seconds(), miss, len(ack))
		}
		if miss != [3]int{} {
			return fmt.Errorf("acknowledged keys missing on n1, n2, n3: %v of %d", miss, len(ack))
		}
		return nil
	})
	if !ok {
		return
	}
	var compared, mismatched uint64
	try := 0
	agreed, ok := poll("replicas agreeing (kvctl repair --dry-run: no differing leaf)", func() error {
		try++
		var err error
		compared, mismatched, err = c.dryRun(ctx, (try-1)%3+1)
		if err == nil && mismatched > 0 {
			err = fmt.Errorf("%d of %d leaves differ", mismatched, compared)
		}
		return err
	})
	cb := b.watch.closedBy(b.t0.Add(b.marks["inject"]))
	b.watch.close()
	drained := "none queued"
	if !cb.emptied.IsZero() {
		drained = fmt.Sprintf("queues empty %.1fs after the heal", cb.emptied.Sub(healed).Seconds())
	}
	agree := "replicas do not agree"
	if ok {
		agree = fmt.Sprintf("replicas agree %.1fs after it (dry run: 0 of %d leaves differ)", agreed.Seconds(), compared)
	}
	t.Logf("%s: converged %.1fs after the heal (%d acknowledged keys on n1, n2, n3, by a local scan of each); %s; hints: %d queued at most, %d handed over, %d dropped, %d still queued, %s; repair: %d sessions since the fault, %d keys repaired over %d differing leaves",
		b.name, held.Seconds(), len(ack), agree, cb.hintsPeak, cb.hintsDelivered, cb.hintsDropped, cb.hintsQueued, drained,
		cb.sessions, cb.keysRepaired, cb.leavesMismatched)
}
