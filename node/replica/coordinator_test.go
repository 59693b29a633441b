package replica

import (
	"errors"
	"fmt"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"ringkv/internal/eventually"
	"ringkv/internal/testclock"
	"ringkv/node/hlc"
	"ringkv/node/ring"
	"ringkv/node/store"
)

func TestPutGetDelete(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{}, nil)

	ts, err := co.Put(ctx, []byte("k"), []byte("v1"), 0, 0)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	rec, found, err := co.Get(ctx, []byte("k"), 0, 0)
	if err != nil || !found || string(rec.Value) != "v1" || rec.TS != ts {
		t.Fatalf("Get = %q@%d found=%v err=%v, want %q@%d", rec.Value, rec.TS, found, err, "v1", ts)
	}
	// Empty value is a value.
	if _, err := co.Put(ctx, []byte("empty"), nil, 0, 0); err != nil {
		t.Fatalf("Put empty: %v", err)
	}
	if rec, found, err := co.Get(ctx, []byte("empty"), 0, 0); err != nil || !found || len(rec.Value) != 0 {
		t.Fatalf("Get empty = %q found=%v err=%v, want empty value found", rec.Value, found, err)
	}
	dts, err := co.Delete(ctx, []byte("k"), 0, 0)
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if dts <= ts {
		t.Errorf("delete ts %d <= put ts %d", dts, ts)
	}
	if rec, found, err := co.Get(ctx, []byte("k"), 0, 0); err != nil || found || !rec.Tombstone {
		t.Fatalf("Get after delete = %+v found=%v err=%v, want tombstone, not found", rec, found, err)
	}
	// Delete of an absent key succeeds.
	if _, err := co.Delete(ctx, []byte("never"), 0, 0); err != nil {
		t.Fatalf("Delete absent: %v", err)
	}
	// A default-quorum write reached every replica.
	eventually.Succeeds(t, 10*time.Second, func() error {
		for id, n := range c.nodes {
			if rec, ok := n.has(t, "empty"); !ok || rec.Tombstone {
				return fmt.Errorf("%s lacks the value", id)
			}
		}
		return nil
	})
}

func TestRequestValidation(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{MaxKeyBytes: 8, MaxValueBytes: 16}, nil)
	tests := []struct {
		name      string
		key, val  string
		ack, from int
		want      error
	}{
		{"empty key", "", "v", 0, 0, ErrInvalidArgument},
		{"key too large", "123456789", "v", 0, 0, ErrKeyTooLarge},
		{"value too large", "k", "12345678901234567", 0, 0, ErrValueTooLarge},
		{"ack > from", "k", "v", 3, 2, ErrInvalidArgument},
		{"from > replicas", "k", "v", 1, 4, ErrInvalidArgument},
		{"negative ack", "k", "v", -1, 0, ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := co.Put(ctx, []byte(tt.key), []byte(tt.val), tt.ack, tt.from); !errors.Is(err, tt.want) {
				t.Errorf("Put error = %v, want %v", err, tt.want)
			}
		})
	}
	var nilView *Coordinator = New(Config{}, "n0", func() *ring.View { return nil }, nil, nil, nil, nil)
	defer nilView.Close()
	if _, _, err := nilView.Get(ctx, []byte("k"), 0, 0); !errors.Is(err, ErrNotAdmitted) {
		t.Errorf("Get without a ring error = %v, want %v", err, ErrNotAdmitted)
	}
}

// The newest version among the replies wins: mixed versions and tombstones.
func TestNewestVersionWins(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{}, nil)
	val := func(ts uint64, v string) store.Record { return store.Record{TS: ts, Value: []byte(v)} }
	tomb := func(ts uint64) store.Record { return store.Record{TS: ts, Tombstone: true} }
	tests := []struct {
		name      string
		have      map[string]store.Record
		wantFound bool
		wantValue string
		wantTS    uint64
	}{
		{"newer value on one", map[string]store.Record{"n0": val(10, "old"), "n1": val(20, "new"), "n2": val(10, "old")}, true, "new", 20},
		{"missing on two", map[string]store.Record{"n2": val(5, "only")}, true, "only", 5},
		{"tombstone newest", map[string]store.Record{"n0": val(10, "v"), "n1": tomb(30), "n2": val(20, "w")}, false, "", 30},
		{"value after tombstone", map[string]store.Record{"n0": tomb(10), "n2": val(20, "back")}, true, "back", 20},
		{"equal ts tombstone wins", map[string]store.Record{"n0": val(10, "v"), "n1": tomb(10)}, false, "", 10},
		{"equal ts bigger value wins", map[string]store.Record{"n0": val(10, "a"), "n1": val(10, "b")}, true, "b", 10},
		{"absent everywhere", map[string]store.Record{}, false, "", 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("key-%d", i)
			for id, rec := range tt.have {
				c.nodes[id].put(t, key, rec)
			}
			rec, found, err := co.Get(ctx, []byte(key), 3, 3)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if found != tt.wantFound || string(rec.Value) != tt.wantValue || rec.TS != tt.wantTS {
				t.Errorf("Get = %q@%d found=%v, want %q@%d found=%v", rec.Value, rec.TS, found, tt.wantValue, tt.wantTS, tt.wantFound)
			}
		})
	}
}

// A coordinator stamps writes after every timestamp it has read.
func TestClockFollowsReplies(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{}, nil)
	future := co.clock.Now() + 1<<30
	for _, n := range c.nodes {
		n.put(t, "k", store.Record{TS: future, Value: []byte("future")})
	}
	if _, _, err := co.Get(ctx, []byte("k"), 3, 3); err != nil {
		t.Fatalf("Get: %v", err)
	}
	ts, err := co.Put(ctx, []byte("k"), []byte("now"), 0, 0)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if ts <= future {
		t.Errorf("Put ts %d, want > %d", ts, future)
	}
}

// Fewer than ack replicas up: ErrNotEnoughReplicas (HTTP 504), returned as
// soon as it is certain even while a replica hangs.
func TestNotEnoughReplicas(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	// ReplicaTimeout of an hour: a coordinator that waited for the hanging
	// replica would block until testCtx fails the test.
	co := c.coordinator(t, "n0", Config{ReplicaTimeout: time.Hour, HedgeMin: time.Hour, HedgeMax: time.Hour}, nil)
	putKEverywhere(t, ctx, co)
	c.nodes["n1"].set(modeDown)
	c.nodes["n2"].set(modeHang)

	tests := []struct {
		name      string
		ack, from int
		wantErr   error
	}{
		{"write ack=3", 3, 3, ErrNotEnoughReplicas},
		{"read ack=3", 3, 3, ErrNotEnoughReplicas},
		{"write ack=1", 1, 3, nil},
		{"read ack=1", 1, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.name[:4] == "read" {
				_, _, err = co.Get(ctx, []byte("k"), tt.ack, tt.from)
			} else {
				_, err = co.Put(ctx, []byte("k"), []byte("v2"), tt.ack, tt.from)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if ctx.Err() != nil {
				t.Fatalf("the coordinator waited for the hanging replica")
			}
		})
	}
	// With two replicas down and the coordinator outside the ring, a
	// default quorum write fails the same way.
	c.nodes["n0"].set(modeDown)
	outside := c.coordinator(t, "", Config{ReplicaTimeout: time.Hour}, nil)
	if _, err := outside.Put(ctx, []byte("k"), []byte("v3"), 0, 0); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Errorf("Put with 2 of 3 down error = %v, want %v", err, ErrNotEnoughReplicas)
	}
}

// Writes answer after ack acks without waiting for a hanging replica,
// which still gets the write once it recovers within the deadline.
func TestWriteDoesNotWaitForSlowReplica(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{ReplicaTimeout: time.Hour}, nil)
	c.nodes["n2"].set(modeHang)
	if _, err := co.Put(ctx, []byte("k"), []byte("v"), 2, 3); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, ok := c.nodes["n2"].has(t, "k"); ok {
		t.Fatalf("hanging replica already has the key")
	}
	c.nodes["n2"].set(modeOK)
	eventually.Succeeds(t, 10*time.Second, func() error {
		if _, ok := c.nodes["n2"].has(t, "k"); !ok {
			return errNotYet
		}
		return nil
	})
}

// Read reconciliation writes the newest version to stale and missing replicas.
func TestReconcile(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	obs := &countingObserver{}
	co := c.coordinator(t, "n0", Config{}, obs)
	newest := store.Record{TS: 20, Value: []byte("new")}
	c.nodes["n0"].put(t, "k", newest)
	c.nodes["n1"].put(t, "k", store.Record{TS: 10, Value: []byte("old")})
	// n2 has nothing.
	rec, found, err := co.Get(ctx, []byte("k"), 3, 3)
	if err != nil || !found || !sameRecord(rec, newest) {
		t.Fatalf("Get = %+v found=%v err=%v, want %+v", rec, found, err, newest)
	}
	eventually.Succeeds(t, 10*time.Second, func() error {
		for _, id := range []string{"n1", "n2"} {
			if got, ok := c.nodes[id].has(t, "k"); !ok || !sameRecord(got, newest) {
				return fmt.Errorf("%s has %+v (found %v), want %+v", id, got, ok, newest)
			}
		}
		if got := obs.repairs.Load(); got != 2 {
			return fmt.Errorf("Reconciled called %d times, want 2", got)
		}
		return nil
	})

	// Tombstones are repaired too.
	c.nodes["n2"].put(t, "k", store.Record{TS: 30, Tombstone: true})
	if _, found, err := co.Get(ctx, []byte("k"), 3, 3); err != nil || found {
		t.Fatalf("Get = found %v err %v, want not found", found, err)
	}
	eventually.Succeeds(t, 10*time.Second, func() error {
		if got, _ := c.nodes["n1"].has(t, "k"); !got.Tombstone {
			return fmt.Errorf("n1 has %+v, want tombstone", got)
		}
		return nil
	})
}

// A reply that arrives after the answer still triggers read reconciliation.
func TestReconcileFromLateReply(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{NoHedge: true, ReplicaTimeout: time.Hour}, nil)
	newest := store.Record{TS: 20, Value: []byte("new")}
	c.nodes["n0"].put(t, "k", newest)
	c.nodes["n1"].put(t, "k", newest)
	c.nodes["n2"].put(t, "k", store.Record{TS: 10, Value: []byte("old")})
	c.nodes["n2"].set(modeHang)
	rec, found, err := co.Get(ctx, []byte("k"), 2, 3)
	if err != nil || !found || !sameRecord(rec, newest) {
		t.Fatalf("Get = %+v found=%v err=%v, want %+v", rec, found, err, newest)
	}
	if got, _ := c.nodes["n2"].has(t, "k"); sameRecord(got, newest) {
		t.Fatalf("n2 repaired before it answered")
	}
	c.nodes["n2"].set(modeOK) // the late reply arrives now
	eventually.Succeeds(t, 10*time.Second, func() error {
		if got, _ := c.nodes["n2"].has(t, "k"); !sameRecord(got, newest) {
			return fmt.Errorf("n2 has %+v, want %+v", got, newest)
		}
		return nil
	})
}

func breakerOf(co *Coordinator, peer string) Breaker {
	for _, b := range co.Breakers() {
		if b.Peer == peer {
			return b
		}
	}
	return Breaker{Peer: peer}
}

// A peer's breaker opens after K consecutive refusals of its connection; while
// it is open the peer is skipped only when the other replicas can still reach
// ack, a 504 names the replicas skipped and why, and a request that needs the
// peer sends to it anyway: its success closes the breaker.
func TestOpenBreakerSkipsOnlyWhenOthersSuffice(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	clock := testclock.New(time.Unix(1000, 0))
	co := c.coordinator(t, "n0", Config{BreakerFailures: 3, Now: clock.Now}, nil)
	n1 := c.nodes["n1"]
	n1.set(modeDown)
	// ack=3 waits for n1's outcome, so its breaker is updated on return.
	for i := range 3 {
		if _, err := co.Put(ctx, []byte("k"), []byte("v"), 3, 3); !errors.Is(err, ErrNotEnoughReplicas) {
			t.Fatalf("Put %d error = %v, want %v", i, err, ErrNotEnoughReplicas)
		}
	}
	if got := breakerOf(co, "n1"); got.State != BreakerOpen || got.ConsecutiveFailures != 3 {
		t.Fatalf("breaker n1 = %+v, want open after 3 failures", got)
	}

	// The others suffice for ack=2: n1 is skipped, not called.
	hints := co.Hints().Pending["n1"]
	calls := n1.writes.Load()
	if _, err := co.Put(ctx, []byte("k"), []byte("v"), 2, 3); err != nil {
		t.Fatalf("Put ack=2 with n1's breaker open: %v", err)
	}
	if got := n1.writes.Load(); got != calls {
		t.Fatalf("n1 got %d calls while the others sufficed", got-calls)
	}
	// ... and it gets a hint.
	eventually.Succeeds(t, 5*time.Second, func() error {
		if got := co.Hints().Pending["n1"]; got != hints+1 {
			return fmt.Errorf("hints for n1 = %d, want %d: it was skipped", got, hints+1)
		}
		return nil
	})

	// ack=3 needs n1: the write goes to it although its breaker is open.
	calls = n1.writes.Load()
	if _, err := co.Put(ctx, []byte("k"), []byte("v"), 3, 3); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("Put ack=3 with n1 down error = %v, want %v", err, ErrNotEnoughReplicas)
	}
	if got := n1.writes.Load(); got != calls+1 {
		t.Fatalf("n1 got %d calls, want 1: ack=3 cannot do without it", got-calls)
	}
	// n1 is back: the first write that needs it succeeds and closes the breaker.
	n1.set(modeOK)
	if _, err := co.Put(ctx, []byte("k"), []byte("v"), 3, 3); err != nil {
		t.Fatalf("Put ack=3 with n1 back: %v", err)
	}
	if got := breakerOf(co, "n1"); got.State != BreakerClosed || got.ConsecutiveFailures != 0 {
		t.Fatalf("breaker n1 = %+v, want closed", got)
	}

	// Reads: the same rule. Open n1's breaker again; ack=3 reads ask it anyway.
	n1.set(modeDown)
	for range 3 {
		co.Put(ctx, []byte("k"), []byte("v"), 3, 3)
	}
	n1.set(modeOK)
	if _, found, err := co.Get(ctx, []byte("k"), 3, 3); err != nil || !found {
		t.Fatalf("Get ack=3 with n1's breaker open but n1 up = found %v err %v, want found", found, err)
	}
	if got := breakerOf(co, "n1"); got.State != BreakerClosed {
		t.Fatalf("breaker n1 after a read that needed it = %+v, want closed", got)
	}
}

// A replica whose breaker is open is asked once another fails and the request
// cannot reach ack without it, and the 504 says so.
func TestNeededReplicaWithOpenBreaker(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{BreakerFailures: 1, HedgeMin: time.Hour, HedgeMax: time.Hour}, nil)
	n0, n1 := c.nodes["n0"], c.nodes["n1"]
	// Every replica holds k first: the failed writes below may end before n2 applies them
	// (a write that cannot reach its ack answers at once), and the last read needs a found.
	if _, err := co.Put(ctx, []byte("k"), []byte("v"), 3, 3); err != nil {
		t.Fatal(err)
	}
	n1.set(modeDown)
	co.Put(ctx, []byte("k"), []byte("v"), 3, 3) // opens n1's breaker
	if got := breakerOf(co, "n1"); got.State != BreakerOpen {
		t.Fatalf("breaker n1 = %+v, want open", got)
	}

	// n0 fails: ack=2 now needs n1, which is asked and fails too.
	n0.set(modeDown)
	calls := n1.writes.Load()
	_, err := co.Put(ctx, []byte("k"), []byte("v"), 2, 3)
	if !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("Put error = %v, want %v", err, ErrNotEnoughReplicas)
	}
	if got := n1.writes.Load() - calls; got != 1 {
		t.Errorf("n1 got %d write calls, want 1: the write needed it", got)
	}
	for _, want := range []string{"replica n0: ", "replica n1 (asked with its breaker open): "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to contain %q", err, want)
		}
	}
	reads := n1.reads.Load()
	_, _, err = co.Get(ctx, []byte("k"), 2, 3)
	if !errors.Is(err, ErrNotEnoughReplicas) || !strings.Contains(err.Error(), "replica n1 (asked with its breaker open): ") {
		t.Errorf("Get error = %v, want %v naming n1 as asked with its breaker open", err, ErrNotEnoughReplicas)
	}
	if got := n1.reads.Load() - reads; got != 1 {
		t.Errorf("n1 got %d read calls, want 1: the read needed it", got)
	}

	// n1 is back: the read that needs it succeeds at once and closes its breaker.
	n1.set(modeOK)
	if _, found, err := co.Get(ctx, []byte("k"), 2, 3); err != nil || !found {
		t.Fatalf("Get with n1 back = found %v err %v, want found", found, err)
	}
	if got := breakerOf(co, "n1"); got.State != BreakerClosed {
		t.Errorf("breaker n1 = %+v, want closed", got)
	}
}

// Breakers lists every peer of the ring, closed until called.
func TestBreakersListsPeers(t *testing.T) {
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{}, nil)
	got := co.Breakers()
	want := []Breaker{{Peer: "n1", State: BreakerClosed}, {Peer: "n2", State: BreakerClosed}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Breakers() = %v, want %v", got, want)
	}
}

// A hedged read is answered by the other replicas when the first one hangs.
func TestHedgedReadAfterDelay(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{ReplicaTimeout: time.Hour, HedgeMin: time.Millisecond, HedgeMax: time.Millisecond}, nil)
	putKEverywhere(t, ctx, co)
	// Self is asked first for ack=1; it hangs, the hedge asks the others.
	c.nodes["n0"].set(modeHang)
	rec, found, err := co.Get(ctx, []byte("k"), 1, 3)
	if err != nil || !found || string(rec.Value) != "v" {
		t.Fatalf("Get = %q found=%v err=%v, want %q", rec.Value, found, err, "v")
	}
	if got := c.nodes["n1"].reads.Load() + c.nodes["n2"].reads.Load(); got == 0 {
		t.Errorf("no peer was asked")
	}
}

// A read starts no goroutine: its calls that wait for their replica go to the coordinator's
// idle readers, and the replies still in flight once it has answered are taken by the calls
// that bring them, not by a goroutine waiting for them (every read here answers at ack=2 of
// 3 calls sent at once). Before: four goroutines per read, one per call and one for the late
// reply.
func TestReadsStartNoGoroutine(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{NoHedge: true}, nil)
	putKEverywhere(t, ctx, co)
	const n = 200
	created := func() uint64 {
		s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	// On a loaded machine a reader is now and then not back at its wait when a read is handed
	// over, and the read starts its own goroutine (0.11–0.42 per read in one batch of 200 of
	// three under two spin loops): the best of five batches counts. A goroutine per call
	// fails every batch.
	var per []float64
	for range 5 {
		before := created()
		for range n {
			if _, found, err := co.Get(ctx, []byte("k"), 2, 3); err != nil || !found {
				t.Fatalf("Get = found %v err %v", found, err)
			}
		}
		if per = append(per, float64(created()-before)/n); per[len(per)-1] <= 0.1 {
			return
		}
	}
	t.Errorf("goroutines started per read in five batches of %d: %.2f, want none", n, per)
}

// A store that hangs holds every reader, and the reads go on: each finds no reader idle,
// starts its own goroutine, and the hedge answers it from the peers.
func TestReadsPastHeldReaders(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{ReplicaTimeout: time.Hour, HedgeMin: time.Millisecond, HedgeMax: time.Millisecond}, nil)
	putKEverywhere(t, ctx, co)
	c.nodes["n0"].set(modeHang)
	for i := range 2 * readers {
		rec, found, err := co.Get(ctx, []byte("k"), 1, 3)
		if err != nil || !found || string(rec.Value) != "v" {
			t.Fatalf("Get %d with n0 hanging = %q found=%v err=%v, want %q", i, rec.Value, found, err, "v")
		}
	}
	if got := c.nodes["n0"].reads.Load(); got != 2*readers {
		t.Errorf("n0 was asked %d reads, want %d (every read asks this node first)", got, 2*readers)
	}
	c.nodes["n0"].set(modeOK)
	rec, found, err := co.Get(ctx, []byte("k"), 1, 1)
	if err != nil || !found || string(rec.Value) != "v" {
		t.Fatalf("Get from n0 once released = %q found=%v err=%v, want %q", rec.Value, found, err, "v")
	}
}

// A replica that fails is replaced at once, without waiting for the hedge
// delay; a peer whose breaker is open is not asked at all.
func TestHedgeOnFailureAndOpenBreaker(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	clock := testclock.New(time.Unix(1000, 0))
	// Hedge delay and per-replica deadline of an hour: only the failure path
	// can answer before testCtx expires.
	co := c.coordinator(t, "n0", Config{
		ReplicaTimeout: time.Hour, HedgeMin: time.Hour, HedgeMax: time.Hour,
		BreakerFailures: 1, Now: clock.Now,
	}, nil)
	putKEverywhere(t, ctx, co)

	c.nodes["n0"].set(modeDown)
	rec, found, err := co.Get(ctx, []byte("k"), 1, 3)
	if err != nil || !found || string(rec.Value) != "v" {
		t.Fatalf("Get with self down = %q found=%v err=%v, want %q", rec.Value, found, err, "v")
	}
	c.nodes["n0"].set(modeOK)

	// Open n1's breaker, then make it hang: reads with ack=2 go to n0 and n2.
	c.nodes["n1"].set(modeDown)
	co.Put(ctx, []byte("k2"), []byte("v"), 3, 3)
	if got := breakerOf(co, "n1"); got.State != BreakerOpen {
		t.Fatalf("breaker n1 = %+v, want open", got)
	}
	c.nodes["n1"].set(modeHang)
	calls := c.nodes["n1"].reads.Load()
	for range 5 {
		if _, found, err := co.Get(ctx, []byte("k"), 2, 3); err != nil || !found {
			t.Fatalf("Get with n1 open = found %v err %v, want found", found, err)
		}
	}
	if got := c.nodes["n1"].reads.Load(); got != calls {
		t.Errorf("n1 got %d reads while its breaker was open", got-calls)
	}
}

// During a ring change, writes also go to the pending replicas, which
// count toward the required acks (ack + len(pending)).
func TestPendingReplicasReceiveWrites(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	cur := newRing(t, 1, 2, []string{"n0", "n1"})
	next := newRing(t, 2, 2, []string{"n0", "n1", "n2"})
	c.view.Store(&ring.View{Current: cur, Next: next})
	v := c.view.Load()
	// A key whose write set has one pending replica.
	var key string
	var natural []ring.Member
	for i := 0; ; i++ {
		key = fmt.Sprintf("key-%d", i)
		var pending []ring.Member
		natural, pending = v.WriteSet(ring.Token([]byte(key)), 2)
		if len(pending) == 1 && pending[0].ID == "n2" {
			break
		}
	}
	co := c.coordinator(t, "", Config{ReplicaTimeout: time.Hour}, nil)

	if _, err := co.Put(ctx, []byte(key), []byte("v"), 2, 2); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, ok := c.nodes["n2"].has(t, key); !ok {
		t.Errorf("pending replica n2 lacks the write")
	}

	// Pending down: ack=2 of 2 natural is not enough, 3 acks are required.
	c.nodes["n2"].set(modeDown)
	if _, err := co.Put(ctx, []byte(key), []byte("v2"), 2, 2); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Errorf("Put with pending down error = %v, want %v", err, ErrNotEnoughReplicas)
	}
	c.nodes["n2"].set(modeOK)

	// One natural down, pending up: ack=1 needs 2, and the pending one counts.
	c.nodes[natural[0].ID].set(modeDown)
	if _, err := co.Put(ctx, []byte(key), []byte("v3"), 1, 2); err != nil {
		t.Errorf("Put with a natural replica down: %v", err)
	}
	// With both naturals down, the pending replica alone is not enough.
	c.nodes[natural[1].ID].set(modeDown)
	if _, err := co.Put(ctx, []byte(key), []byte("v4"), 1, 2); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Errorf("Put with naturals down error = %v, want %v", err, ErrNotEnoughReplicas)
	}
}

// Close stops everything, and later operations fail with ErrClosed.
func TestCloseWhileReplicaHangs(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	co := c.coordinator(t, "n0", Config{ReplicaTimeout: time.Hour}, nil)
	c.nodes["n2"].set(modeHang)
	if _, err := co.Put(ctx, []byte("k"), []byte("v"), 2, 3); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := co.Close(); err != nil { // cancels n2's hanging call
		t.Fatalf("Close: %v", err)
	}
	if _, err := co.Put(ctx, []byte("k"), []byte("v"), 1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close error = %v, want %v", err, ErrClosed)
	}
	if got := breakerOf(co, "n2"); got.State != BreakerClosed || got.ConsecutiveFailures != 0 {
		t.Errorf("breaker n2 = %+v: a call cancelled by Close must not count as a failure", got)
	}
}

// A node whose clock is off most of its peers (Config.ClockCheck) refuses to stamp writes:
// no replica gets one. Reads go on.
func TestClockCheckRefusesWrites(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t, 3)
	offErr := fmt.Errorf("%w: this node's clock is 3s off 2 of 2 peers", hlc.ErrClockOffset)
	co := c.coordinator(t, "n0", Config{ClockCheck: func() error { return offErr }}, nil)
	if _, err := co.Put(ctx, []byte("k"), []byte("v"), 1, 3); !errors.Is(err, hlc.ErrClockOffset) {
		t.Fatalf("Put error = %v, want %v", err, hlc.ErrClockOffset)
	}
	for id, n := range c.nodes {
		if _, ok := n.has(t, "k"); ok {
			t.Errorf("%s holds a write the coordinator refused to stamp", id)
		}
	}
	if _, found, err := co.Get(ctx, []byte("k"), 1, 3); err != nil || found {
		t.Errorf("Get = found %v err %v, want not found and no error", found, err)
	}
}
