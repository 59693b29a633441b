package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/internal/testclock"
	"ringkv/node"
	"ringkv/proto/kvpb"
	"ringkv/tui"
)

// TestTUIHotKeyAlertOnCluster runs the console's hot-key alert against a real 3-node cluster
// whose nodes keep time by a test clock: uniform writes raise no alert; one key taking most
// writes raises "hot key hot is N% of vnode …" once 5 s of it reached a node, and the alert
// clears once the node's live window has moved past the skew (15 s of the clock).
func TestTUIHotKeyAlertOnCluster(t *testing.T) {
	start := time.Now().Truncate(10 * time.Second).Add(6 * time.Second) // 6 s into a 10 s slice
	clk := testclock.New(start)
	base := node.DefaultConfig()
	base.VNodes = 8
	base.Now = clk.Now
	base.ReplicaTimeout = 5 * time.Second // a loaded machine: the point is the alert, not the latency
	tc := startTUIClusterOf(t, base)

	conn, err := grpc.NewClient(tc.c.Node(0).Addrs().GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := kvpb.NewKVClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	put := func(key string, n int) {
		t.Helper()
		for range n {
			if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte("v")}); err != nil {
				t.Fatalf("put %s: %v", key, err)
			}
		}
	}
	noise := 0
	putNoise := func(n int) {
		for range n {
			put(fmt.Sprintf("noise-%d", noise), 1)
			noise++
		}
	}

	var model tea.Model = tui.New(tui.Options{Source: tc.src})
	step := func(msg tea.Msg) { model, _ = model.Update(msg) }
	rg, err := tc.src.Ring(ctx)
	if err != nil {
		t.Fatalf("ring: %v", err)
	}
	step(tui.RingMsg{Resp: rg})
	// alerted asks the nodes for their live hot keys, as the console does every second.
	alerted := func() (bool, string) {
		r, err := tc.src.HotKeys(ctx, &kvpb.HotKeysRequest{Live: true, Limit: 20})
		if err != nil {
			t.Fatalf("live hot keys: %v", err)
		}
		step(tui.LiveKeysMsg{Resp: r})
		screen := model.(tui.Model).Render()
		return strings.Contains(screen, "hot key hot is"), screen
	}

	putNoise(60)
	if on, screen := alerted(); on {
		t.Fatalf("uniform writes: got a hot-key alert, want none:\n%s", screen)
	}
	// The skew: 60 writes a second to one key for 5 s of the clock, a little noise beside.
	clk.Advance(time.Second)
	for range 5 {
		put("hot", 60)
		putNoise(5)
		clk.Advance(time.Second)
	}
	on, screen := alerted()
	if !on {
		t.Fatalf("5 s into the skew: got no hot-key alert, want one:\n%s", screen)
	}
	if !strings.Contains(screen, "% of vnode") || !strings.Contains(screen, "ops/s") {
		t.Errorf("alert lacks the vnode share or the rate:\n%s", screen)
	}
	// The skew ends; noise goes on for 15 s of the clock.
	for range 15 {
		putNoise(5)
		clk.Advance(time.Second)
	}
	if on, screen := alerted(); on {
		t.Errorf("15 s after the skew: got the hot-key alert, want it cleared:\n%s", screen)
	}
}
