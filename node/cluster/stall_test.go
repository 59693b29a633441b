package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/internal/eventually"
	"ringkv/node/ring"
	"ringkv/node/store"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// TestStallCause: a stalled pull's last error names its cause by the reason it carries.
func TestStallCause(t *testing.T) {
	wire := func(err error) error { return rpcerr.Decode(rpcerr.Encode(err)) }
	for _, tt := range []struct {
		name   string
		err    error
		cause  kvpb.StallCause
		reason string
	}{
		{"receiver disk full", fmt.Errorf("stream range from n1: apply: %w", store.ErrDiskFull), kvpb.StallCause_STALL_CAUSE_DISK_FULL, "DISK_FULL"},
		{"source refuses a stale view", fmt.Errorf("stream range from n1: %w", wire(rpcerr.New(kvpb.Reason_REASON_STALE_VIEW, "stale ring view"))), kvpb.StallCause_STALL_CAUSE_REFUSED, "STALE_VIEW"},
		{"source shutting down", wire(rpcerr.New(kvpb.Reason_REASON_SHUTTING_DOWN, "shutting down")), kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE, "SHUTTING_DOWN"},
		{"connection refused", rpcerr.Decode(status.Error(codes.Unavailable, "connection refused")), kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE, ""},
		{"deadline", context.DeadlineExceeded, kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE, "DEADLINE_EXCEEDED"},
		{"no source in the ring", fmt.Errorf("move 3: no source in the current ring: %w", ErrUnknownMember), kvpb.StallCause_STALL_CAUSE_FAILING, "UNKNOWN_MEMBER"},
		{"plain error", errors.New("stream ended"), kvpb.StallCause_STALL_CAUSE_SOURCE_UNREACHABLE, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cause, reason := stallCause(tt.err)
			if cause != tt.cause || reason != tt.reason {
				t.Errorf("got %v %q, want %v %q", cause, reason, tt.cause, tt.reason)
			}
		})
	}
}

// A move whose source sends nothing is stalled after StallAfter, naming the source; while
// the change is paused it is not, and the clock starts again at the resume.
func TestMoverStallNamesSourceNotWhilePaused(t *testing.T) {
	nodes := startFounders(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newcomer := startNode(t, "n4", listen(t, ""), filepath.Join(t.TempDir(), "n4"), nil)
	stores := storeSource{}
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		stores[id] = openStore(t, filepath.Join(t.TempDir(), "store-"+id))
	}
	r := nodes[0].c.View().Current
	for i := range 500 {
		key := fmt.Appendf(nil, "key-%05d", i)
		tok := ring.Token(key)
		for _, m := range r.Lookup(tok, r.ReplicationFactor()) {
			if _, err := stores[m.ID].Apply(tok, key, store.Record{TS: uint64(i + 1), Value: []byte("v")}); err != nil {
				t.Fatalf("seed: %v", err)
			}
		}
	}
	const after = 300 * time.Millisecond
	silent := &stallingSource{src: stores, limit: 0} // sends nothing, fails never
	m, _ := startMoverConfig(t, newcomer, silent, stores["n4"], func(c *MoverConfig) { c.StallAfter = after })
	if _, err := nodes[1].c.Begin(ctx, ChangeRequest{Kind: KindAdd, NodeID: "n4", Addr: newcomer.addr}); err != nil {
		t.Fatalf("add: %v", err)
	}
	stalled := func() []*kvpb.MoveStall {
		var out []*kvpb.MoveStall
		for _, p := range m.Progress() {
			if p.Stall != nil {
				out = append(out, p.Stall)
			}
		}
		return out
	}
	eventually.Succeeds(t, 10*time.Second, func() error {
		s := stalled()
		if len(s) == 0 {
			return errors.New("no move stalled")
		}
		if s[0].GetCause() != kvpb.StallCause_STALL_CAUSE_NO_DATA || s[0].GetSource() == "" || s[0].GetReceiver() != "n4" {
			return fmt.Errorf("got stall %v, want no data from a named source into n4", s[0])
		}
		return nil
	})
	if err := nodes[0].c.Pause(ctx, "test", "quiet"); err != nil {
		t.Fatalf("pause: %v", err)
	}
	eventually.Succeeds(t, 10*time.Second, func() error {
		if s := stalled(); len(s) > 0 {
			return fmt.Errorf("paused: got %d stalled moves, want none", len(s))
		}
		return nil
	})
	if err := nodes[0].c.Resume(ctx, "test"); err != nil {
		t.Fatalf("resume: %v", err)
	}
	eventually.Succeeds(t, 10*time.Second, func() error {
		if ch := newcomer.c.Change(); ch == nil || ch.Paused() != nil {
			return errors.New("n4 not resumed yet")
		}
		return nil
	})
	resumedAt := time.Now()
	eventually.Succeeds(t, 10*time.Second, func() error {
		s := stalled()
		if len(s) == 0 {
			return errors.New("no move stalled after the resume")
		}
		if since := time.Unix(s[0].GetSinceUnix(), 0); since.Before(resumedAt.Add(-2 * time.Second)) {
			return fmt.Errorf("got stalled since %v, want from the resume (%v)", since, resumedAt)
		}
		return nil
	})
}
