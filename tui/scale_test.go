package tui

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"ringkv/proto/kvpb"
)

// newScaleSource is a FakeSource of nodes nodes with vnodes vnodes each, interleaved on the
// ring, each reporting its own vnodes' load once: the console of a large cluster.
func newScaleSource(nodes, vnodes int) *FakeSource {
	step := math.MaxUint64 / uint64(nodes*vnodes)
	members := make([]*kvpb.Member, nodes)
	st := &kvpb.StatusResponse{Epoch: 3, Replicas: 3}
	rg := &kvpb.RingResponse{Ring: &kvpb.RingState{Epoch: 3, Replicas: 3}}
	for i := range members {
		id := fmt.Sprintf("n%d", i+1)
		members[i] = &kvpb.Member{Id: id, GrpcAddr: fmt.Sprintf("10.0.%d.%d:9090", i/250, i%250+1), State: kvpb.NodeState_NODE_STATE_UP, Weight: 1}
		st.Nodes = append(st.Nodes, &kvpb.NodeStatus{Id: id, GrpcAddr: members[i].GrpcAddr, State: kvpb.NodeState_NODE_STATE_UP,
			Info: &kvpb.NodeInfoResponse{Id: id, Epoch: 3, RaftRole: kvpb.RaftRole_RAFT_ROLE_FOLLOWER}})
		switch {
		case i == 0:
			st.Nodes[i].Info.RaftRole = kvpb.RaftRole_RAFT_ROLE_LEADER
		case i >= 5:
			st.Nodes[i].Info.RaftRole = kvpb.RaftRole_RAFT_ROLE_NONVOTER
		}
		rg.Ownership = append(rg.Ownership, &kvpb.NodeOwnership{Id: id, State: kvpb.NodeState_NODE_STATE_UP, Vnodes: uint32(vnodes), Share: 1 / float64(nodes)})
	}
	for k := range nodes * vnodes {
		members[k%nodes].Tokens = append(members[k%nodes].Tokens, uint64(k+1)*step)
	}
	rg.Ring.Members = members
	f := &FakeSource{statusResp: st, ringResp: rg, stats: make(chan *kvpb.NodeStats, nodes+8), changes: make(chan *kvpb.ChangeProgress, 8)}
	for i, m := range members {
		ns := &kvpb.NodeStats{Id: m.Id, Epoch: 3, State: kvpb.NodeState_NODE_STATE_UP, OpsPerSec: float64(100 + i), P99Ms: 2 + float64(i%7)}
		for j, t := range m.Tokens {
			reads := float64((i*37+j*11)%50 + 1)
			if i == 41 && j == 7 {
				reads = 5000 // one hot vnode
			}
			ns.Vnodes = append(ns.Vnodes, &kvpb.VnodeStats{Token: t, Start: t - step, Reads_1S: reads, Writes_1S: reads / 4, Keys: 1000, Bytes: 128000})
			ns.Keys += 1000
			ns.DiskBytes += 128000
		}
		f.stats <- ns
	}
	return f
}

// TestConsoleAtScale: the console of 9 nodes and of 100 nodes × 64 vnodes stays within the
// terminal on every screen — no line wider than the terminal, no more lines than it has — and
// names nodes on the overview and the heatmap. The model is driven directly (no program): the
// screens are pure functions of the messages.
func TestConsoleAtScale(t *testing.T) {
	for _, nodes := range []int{9, 100} {
		const vnodes = 64
		src := newScaleSource(nodes, vnodes)
		defer src.Close()
		var m tea.Model = New(Options{Source: src, Actions: FakeActions{}, Now: func() time.Time { return fixedNow }})
		m, _ = m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
		st, _ := src.Status(t.Context())
		rg, _ := src.Ring(t.Context())
		m, _ = m.Update(StatusMsg{Resp: st})
		m, _ = m.Update(RingMsg{Resp: rg})
		for range nodes {
			m, _ = m.Update(StatsMsg{Stats: <-src.Stats()})
		}
		for _, sc := range []struct{ w, h int }{{80, 24}, {160, 48}, {60, 16}} {
			m, _ = m.Update(tea.WindowSizeMsg{Width: sc.w, Height: sc.h})
			t.Run(fmt.Sprintf("%dx%d-%dx%d", nodes, vnodes, sc.w, sc.h), func(t *testing.T) {
				for _, key := range []string{"1", "2", "3"} {
					m, _ = m.Update(tea.KeyPressMsg{Code: rune(key[0]), Text: key})
					screen := ansi.Strip(m.(Model).Render())
					lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
					if len(lines) > sc.h {
						t.Errorf("screen %s: got %d lines, want at most %d", key, len(lines), sc.h)
					}
					for i, l := range lines {
						if w := ansi.StringWidth(l); w > sc.w {
							t.Errorf("screen %s line %d: got width %d, want at most %d: %q", key, i, w, sc.w, l)
						}
					}
					if key != "3" && !strings.Contains(screen, "n1 ") {
						t.Errorf("screen %s names no node", key)
					}
					// Nodes in the order an operator counts them: n2 right after n1, not n10.
					if i, j := strings.Index(screen, "\nn2 "), strings.Index(screen, "\nn10 "); key != "3" && (i < 0 || j >= 0 && j < i) {
						t.Errorf("screen %s: got n2 at %d, n10 at %d, want n2 listed first", key, i, j)
					}
					// More nodes than lines: the heatmap says which rows it draws, and where the
					// hottest vnode (n42's) is while its row is off-screen.
					if key == "2" && nodes == 100 && (!strings.Contains(screen, "of 100 · ") || !strings.Contains(screen, "hot vnode: n42, row 42 ↓")) {
						t.Errorf("heatmap of 100 nodes: got no scroll line naming the hot vnode's node n42")
					}
					if t.Failed() || testing.Verbose() {
						t.Logf("screen %s:\n%s", key, screen)
					}
				}
			})
		}
	}
}
