package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/proto/kvpb"
)

// mountTmpfs mounts a tmpfs of size at a new directory, unmounted at the end of the test
// (after everything registered later, e.g. the node using it, has stopped).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (CI runs as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestDiskFull: a kvnode on a 48 MiB tmpfs (8 MiB of it taken by a ballast file) with a
// 16 MiB reserve is filled with 64 KiB values until it answers 507; reads still answer 200
// and every acknowledged write is readable, /readyz and NodeInfo say the disk is full; a
// restart on a full disk works (read-only); once space is freed, writes resume by themselves.
func TestDiskFull(t *testing.T) {
	mnt := mountTmpfs(t, "48m")
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatalf("write ballast: %v", err)
	}
	bin := buildBins(t).kvnode
	p := startOne(t, bin, filepath.Join(mnt, "n1"), "--min-free-disk", "16MiB")

	acked := map[string]string{}
	value := func(key string) string { // incompressible: badger compresses its tables
		var seed [32]byte
		copy(seed[:], key)
		b := make([]byte, 64<<10)
		rand.NewChaCha8(seed).Read(b)
		return string(b)
	}
	put := func(key string) (int, string) {
		t.Helper()
		code, body, err := request("PUT", fmt.Sprintf("http://%s/v0/entity?id=%s", p.http, key), []byte(value(key)))
		if err != nil {
			t.Fatalf("PUT %s: %v\n%s", key, err, tail(p.log, 30))
		}
		if code == http.StatusCreated {
			acked[key] = value(key)
		}
		return code, body
	}
	checkReads := func(when string) {
		t.Helper()
		for key, want := range acked {
			code, body, err := request("GET", fmt.Sprintf("http://%s/v0/entity?id=%s", p.http, key), nil)
			if err != nil || code != http.StatusOK || body != want {
				t.Fatalf("%s: GET %s: got %d (%d bytes, %v), want 200 with the acknowledged value", when, key, code, len(body), err)
			}
		}
	}
	filler := 0
	// fillUntilFull writes 64 KiB values until the node answers 507.
	fillUntilFull := func() {
		t.Helper()
		for range 2000 {
			filler++
			code, body := put(fmt.Sprintf("fill-%04d", filler))
			if code == http.StatusInsufficientStorage {
				if !strings.Contains(body, "disk full") {
					t.Fatalf("507 body: got %q, want it to say disk full", body)
				}
				t.Logf("507 after %d acknowledged 64 KiB writes: %s", len(acked), strings.TrimSpace(body))
				return
			}
			if code != http.StatusCreated {
				t.Fatalf("PUT #%d: got %d %q, want 201 or 507", filler, code, body)
			}
		}
		t.Fatalf("no 507 after %d writes to a 48 MiB tmpfs", len(acked))
	}
	fillUntilFull()
	checkReads("disk full")
	// isFull: /readyz and NodeInfo say the disk is full, and /v0/status is still 200. Badger's
	// own flushes may free a little room in between, so the state is checked where it holds.
	isFull := func() error {
		code, body, err := request("GET", "http://"+p.admin+"/readyz", nil)
		if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "disk full") {
			return fmt.Errorf("/readyz: got %d %q (%v), want 503 saying disk full", code, body, err)
		}
		if code, _, _ := request("GET", "http://"+p.http+"/v0/status", nil); code != http.StatusOK {
			t.Fatalf("/v0/status on a full disk: got %d, want 200 (reads are served)", code)
		}
		cc, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := kvpb.NewAdminClient(cc).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
		if err != nil || info.GetDiskFull() == "" {
			return fmt.Errorf("NodeInfo: got disk_full %q (%v), want the reason", info.GetDiskFull(), err)
		}
		return nil
	}
	checkFull := func() {
		t.Helper()
		for round := 0; ; round++ {
			err := isFull()
			if err == nil {
				return
			}
			if round == 5 {
				t.Fatalf("on a full disk: %v", err)
			}
			fillUntilFull()
		}
	}
	checkFull()

	// A restart on a full disk: badger's flush at Close may have freed some room, so more
	// ballast makes sure the node starts below its reserve. It starts, serves reads, refuses
	// writes.
	stopProc(t, p)
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	if free := int64(st.Bavail) * st.Bsize; free > 2<<20 {
		if err := os.WriteFile(ballast+"2", make([]byte, free-2<<20), 0o644); err != nil {
			t.Fatalf("write ballast: %v", err)
		}
	}
	p.start(t, bin, "n1="+p.grpc)
	waitStatus(t, p, http.StatusOK)
	if code, body := put("after-restart"); code != http.StatusInsufficientStorage {
		t.Fatalf("PUT after a restart on a full disk: got %d %q, want 507", code, body)
	}
	checkReads("restarted on a full disk")
	checkFull()

	// Space back: writes resume by themselves.
	for _, f := range []string{ballast, ballast + "2"} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "writes resume", func() error {
		if code, body := put("resumed"); code != http.StatusCreated {
			return fmt.Errorf("PUT: got %d %q", code, body)
		}
		return nil
	})
	if code, body, _ := request("GET", "http://"+p.admin+"/readyz", nil); code != http.StatusOK {
		t.Fatalf("/readyz with space back: got %d %q, want 200", code, body)
	}
	checkReads("space back")
	t.Logf("%d acknowledged writes read back", len(acked))
}
