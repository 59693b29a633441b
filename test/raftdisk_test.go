package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

// fillUp writes a ballast file in dir until the file system has no byte left.
func fillUp(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "ballast"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for len(chunk) > 0 {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			chunk = chunk[:len(chunk)/2]
		}
	}
	if free := freeBytes(t, dir); free != 0 {
		t.Fatalf("after filling %s: %d bytes free, want 0", dir, free)
	}
}

// TestRaftOnFullDisk: <data>/raft on a full disk. n3's data directory is on a small tmpfs
// that something else then fills to the last byte (below the store's reserve: the node's
// own writes are refused before that); n1 and n2 are killed and restarted, so the metadata
// group holds an election at a new term, which every member must persist in raft.db
// (hashicorp/raft panics when it cannot save its term). n3 keeps running, takes part (it
// follows the new leader), says its disk is full, and every write acknowledged before
// still reads back through it at a quorum, and it stops cleanly on the full disk (exit 0).
func TestRaftOnFullDisk(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "40m")
	c := startClusterDirs(t, 3, 0, []string{"--min-free-disk", "8MiB"}, map[string]string{"n3": filepath.Join(mnt, "n3")})
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	acked := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 50 {
		key, val := fmt.Sprintf("before-%02d", i), fmt.Sprintf("v%02d", i)
		if _, err := c.kv(n1).Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte(val), Ack: 3}); err != nil {
			t.Fatalf("PUT %s ack=3: %v", key, err)
		}
		acked[key] = val
	}
	fillUp(t, mnt)

	c.kill(n1)
	c.kill(n2)
	c.restart(n1)
	c.restart(n2)
	waitFor(t, 60*time.Second, "a leader elected with n3 as its follower", func() error {
		select {
		case err := <-n3.done:
			n3.done <- err
			t.Fatalf("n3 exited on a full disk during the election: %v\n%s", err, crashOf(n3.log.String()))
		default:
		}
		leaders := 0
		for _, p := range []*proc{n1, n2, n3} {
			ictx, icancel := context.WithTimeout(ctx, 2*time.Second)
			info, err := c.admin(p).NodeInfo(ictx, &kvpb.NodeInfoRequest{})
			icancel()
			if err != nil {
				return fmt.Errorf("%s: %w", p.id, err)
			}
			switch {
			case info.GetRaftRole() == kvpb.RaftRole_RAFT_ROLE_LEADER:
				leaders++
			case p == n3 && info.GetRaftRole() != kvpb.RaftRole_RAFT_ROLE_FOLLOWER:
				return fmt.Errorf("n3 is %s", info.GetRaftRole())
			}
		}
		if leaders != 1 {
			return fmt.Errorf("%d leaders", leaders)
		}
		return nil
	})
	ictx, icancel := context.WithTimeout(ctx, 5*time.Second)
	info, err := c.admin(n3).NodeInfo(ictx, &kvpb.NodeInfoRequest{})
	icancel()
	if err != nil || info.GetDiskFull() == "" {
		t.Errorf("n3 NodeInfo on a full disk: got disk_full %q (%v), want the reason", info.GetDiskFull(), err)
	}
	for key, want := range acked {
		gctx, gcancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := c.kv(n3).Get(gctx, &kvpb.GetRequest{Key: []byte(key), Ack: 2, From: 3})
		gcancel()
		if err != nil || string(resp.GetValue()) != want {
			t.Errorf("GET %s through n3 at a quorum: got %q (%v), want %q", key, resp.GetValue(), err, want)
		}
	}
}

// crashOf is the start of a Go crash report in a process's log (the panic or fatal error
// and the lines before it), or its last lines when there is none.
func crashOf(log string) string {
	for _, mark := range []string{"\npanic: ", "\nfatal error: ", "\nunexpected fault", "\nSIGBUS"} {
		if i := strings.Index(log, mark); i >= 0 {
			start := max(0, strings.LastIndex(log[:max(0, i-1500)], "\n"))
			return log[start:min(len(log), i+1500)]
		}
	}
	lines := strings.Split(log, "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}
