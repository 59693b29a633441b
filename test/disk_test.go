package test

import (
	"context"
	"errors"
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

	"ringkv/node/store"
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
	t.Cleanup(func() { umount(t, dir) })
	return dir
}

// mountExt4 makes an ext4 file system in an image of sizeMiB and mounts it (loop) at a new
// directory, unmounted at the end of the test.
func mountExt4(t *testing.T, sizeMiB int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount an ext4 loop image (CI runs as root)")
	}
	img := filepath.Join(t.TempDir(), "volume.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, int64(sizeMiB)<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v: %s", err, out)
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("mount -o loop: %v: %s", err, out)
	}
	t.Cleanup(func() { umount(t, dir) })
	return dir
}

func umount(t *testing.T, dir string) {
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		t.Errorf("umount %s: %v: %s", dir, err, out)
	}
}

// freeBytes is the free space of the file system holding dir.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	free, _, err := store.Volume(dir)
	if err != nil {
		t.Fatal(err)
	}
	return int64(free)
}

// randomValue is key's 64 KiB value, incompressible (badger compresses its tables).
func randomValue(key string) string {
	var seed [32]byte
	copy(seed[:], key)
	b := make([]byte, 64<<10)
	rand.NewChaCha8(seed).Read(b)
	return string(b)
}

// diskFullLine is how a refused write, /readyz and kvctl status name a full disk.
func diskFullLine(s string) bool {
	return strings.Contains(s, "disk full: ") && strings.Contains(s, " free of ") &&
		strings.Contains(s, ", reserve ") && strings.Contains(s, "(--min-free-disk)")
}

// TestSmallVolumes: a kvnode with default flags on a new directory of a small volume (tmpfs
// of 16, 24 and 64 MiB, a 24 MiB ext4 image) starts; 64 KiB PUTs fill it until 507 "disk
// full: X free of Y, reserve Z (--min-free-disk)", which /readyz, NodeInfo and kvctl status
// say too; reads go on; another process takes the last byte and the node stops cleanly (exit
// 0, no SIGBUS of a flush into a mapped file); it restarts on the full disk; once space is
// freed writes resume by themselves; another process fills the volume to the last byte again
// and the node stops cleanly; every acknowledged write reads back after a restart.
func TestSmallVolumes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		mount func(t *testing.T) string
	}{
		{"tmpfs-16MiB", func(t *testing.T) string { return mountTmpfs(t, "16m") }},
		{"tmpfs-24MiB", func(t *testing.T) string { return mountTmpfs(t, "24m") }},
		{"tmpfs-64MiB", func(t *testing.T) string { return mountTmpfs(t, "64m") }},
		{"ext4-24MiB", func(t *testing.T) string { return mountExt4(t, 24) }},
	} {
		t.Run(tc.name, func(t *testing.T) { smallVolume(t, tc.mount(t)) })
	}
}

func smallVolume(t *testing.T, mnt string) {
	// The space freed later: 4 MiB taken before the node starts.
	ballast := filepath.Join(mnt, "test-ballast")
	if err := os.WriteFile(ballast, []byte(strings.Repeat(randomValue("ballast"), 64)), 0o644); err != nil {
		t.Fatalf("write ballast: %v", err)
	}
	bins := buildBins(t)
	p := startOne(t, bins.kvnode, filepath.Join(mnt, "n1"))

	acked := map[string]string{}
	put := func(key string) (int, string) {
		t.Helper()
		code, body, err := request("PUT", fmt.Sprintf("http://%s/v0/entity?id=%s", p.http, key), []byte(randomValue(key)))
		if err != nil {
			t.Fatalf("PUT %s: %v\n%s", key, err, tail(p.log, 30))
		}
		if code == http.StatusCreated {
			acked[key] = randomValue(key)
		}
		return code, body
	}
	checkReads := func(when string) {
		t.Helper()
		for key, want := range acked {
			code, body, err := request("GET", fmt.Sprintf("http://%s/v0/entity?id=%s", p.http, key), nil)
			if err != nil || code != http.StatusOK || body != want {
				t.Fatalf("%s: GET %s: got %d (%d bytes, %v), want 200 with the acknowledged value\n%s", when, key, code, len(body), err, tail(p.log, 20))
			}
		}
	}
	filler := 0
	fillUntilFull := func() {
		t.Helper()
		for range 2000 {
			filler++
			code, body := put(fmt.Sprintf("fill-%04d", filler))
			if code == http.StatusInsufficientStorage {
				if !diskFullLine(body) || !strings.HasPrefix(body, "disk full: ") {
					t.Fatalf("507 body: got %q, want \"disk full: X free of Y, reserve Z (--min-free-disk)\"", body)
				}
				t.Logf("507 after %d acknowledged 64 KiB writes: %s", len(acked), strings.TrimSpace(body))
				return
			}
			if code != http.StatusCreated {
				t.Fatalf("PUT #%d: got %d %q, want 201 or 507\n%s", filler, code, body, tail(p.log, 20))
			}
		}
		t.Fatalf("no 507 after %d writes", len(acked))
	}
	// isFull: /readyz, NodeInfo and kvctl status say the disk is full; /v0/status is 200.
	isFull := func() error {
		code, body, err := request("GET", "http://"+p.admin+"/readyz", nil)
		if err != nil || code != http.StatusServiceUnavailable || !diskFullLine(body) {
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
		if err != nil || !diskFullLine(info.GetDiskFull()) {
			return fmt.Errorf("NodeInfo: got disk_full %q (%v), want the reason", info.GetDiskFull(), err)
		}
		out, err := exec.CommandContext(ctx, bins.kvctl, "--addr", p.grpc, "status").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "DISK FULL: ") || !strings.Contains(string(out), "(--min-free-disk)") {
			return fmt.Errorf("kvctl status: got %v\n%s\nwant a note DISK FULL: X free of Y, reserve Z (--min-free-disk)", err, out)
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
			fillUntilFull() // badger's own flushes may have freed a little room
		}
	}
	fillUntilFull()
	checkReads("disk full")
	checkFull()

	// Full of its own writes, then another process takes the last byte: it stops cleanly.
	fillUp(t, mnt)
	stopProc(t, p)
	if t.Failed() {
		t.Fatalf("stop on a full volume whose last byte another process took:\n%s", crashOf(p.log.String()))
	}
	if err := os.Remove(filepath.Join(mnt, "ballast")); err != nil {
		t.Fatal(err)
	}

	// A restart on a full disk (more ballast: the state of a fresh start has no hysteresis).
	if free := freeBytes(t, mnt); free > 1<<20 {
		if err := os.WriteFile(ballast+"2", make([]byte, free-1<<20), 0o644); err != nil {
			t.Fatalf("write ballast: %v", err)
		}
	}
	p.start(t, bins.kvnode, "n1="+p.grpc)
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
	for i := range 8 {
		if code, body := put(fmt.Sprintf("after-%d", i)); code != http.StatusCreated {
			t.Fatalf("PUT with space back: got %d %q, want 201", code, body)
		}
	}
	if code, body, _ := request("GET", "http://"+p.admin+"/readyz", nil); code != http.StatusOK {
		t.Fatalf("/readyz with space back: got %d %q, want 200", code, body)
	}
	checkReads("space back")

	// Another process takes the last byte, then the node stops: exit 0, nothing lost.
	fillUp(t, mnt)
	stopProc(t, p)
	if t.Failed() {
		t.Fatalf("stop on a volume filled to the last byte:\n%s", crashOf(p.log.String()))
	}
	if err := os.Remove(filepath.Join(mnt, "ballast")); err != nil {
		t.Fatal(err)
	}
	p.start(t, bins.kvnode, "n1="+p.grpc)
	waitStatus(t, p, http.StatusOK)
	checkReads("restarted after a stop on a volume with no byte left")
	t.Logf("%d acknowledged writes read back", len(acked))
}

// TestVolumeTooSmall: on a 4 MiB tmpfs kvnode refuses to start, in one line naming the
// minimum, exit 1 (not a crash, not "damaged").
func TestVolumeTooSmall(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "4m")
	bin := buildBins(t).kvnode
	out, err := exec.Command(bin, "--id", "n1", "--data", filepath.Join(mnt, "n1"), "--grpc", freeAddr(t), "--http", freeAddr(t),
		"--admin", freeAddr(t), "--replicas", "1", "--log-format", "json").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("kvnode on a 4 MiB volume: got %v, want exit 1\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "kvnode: ") {
			lines = append(lines, l)
		}
	}
	want := fmt.Sprintf("below the minimum of %d.0 MiB", store.MinVolume>>20)
	if len(lines) != 1 || !strings.Contains(lines[0], want) || strings.Contains(lines[0], "damage") {
		t.Fatalf("kvnode on a 4 MiB volume: got %q, want one line saying %q", lines, want)
	}
	t.Logf("%s", lines[0])
}

// TestClusterWithSmallVolume: three nodes, n3 on a 16 MiB tmpfs (default flags). ack=2
// writes through n1 fill n3 until it says its disk is full; more ack=2 writes through n1 and
// n2 keep succeeding while it is; once space is freed on n3 and a repair ran, n3 holds every
// acknowledged write. Then another process fills n3's volume to the last byte and n3 stops
// cleanly (exit 0): its store, opened afterwards, still holds every acknowledged write.
func TestClusterWithSmallVolume(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "16m")
	ballast := filepath.Join(mnt, "test-ballast")
	if err := os.WriteFile(ballast, []byte(strings.Repeat(randomValue("ballast"), 64)), 0o644); err != nil {
		t.Fatalf("write ballast: %v", err)
	}
	c := startClusterDirs(t, 3, 0, nil, map[string]string{"n3": filepath.Join(mnt, "n3")})
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	ctx := context.Background()
	acked := map[string]string{}
	put := func(via *proc, key string) error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		val := randomValue(key)
		if _, err := c.kv(via).Put(pctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte(val), Ack: 2}); err != nil {
			return err
		}
		acked[key] = val
		return nil
	}
	full := func() string {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		info, err := c.admin(n3).NodeInfo(ictx, &kvpb.NodeInfoRequest{})
		if err != nil {
			t.Fatalf("NodeInfo n3: %v", err)
		}
		return info.GetDiskFull()
	}
	i := 0
	for ; full() == ""; i++ {
		if i == 1000 {
			t.Fatalf("n3 not full after %d writes of 64 KiB", i)
		}
		if err := put(n1, fmt.Sprintf("k%04d", i)); err != nil {
			t.Fatalf("PUT #%d ack=2 via n1: %v", i, err)
		}
	}
	t.Logf("n3 full after %d writes: %s", i, full())
	for j := range 20 {
		via := []*proc{n1, n2}[j%2]
		if err := put(via, fmt.Sprintf("while-full-%02d", j)); err != nil {
			t.Fatalf("PUT ack=2 via %s while n3's disk is full: %v", via.id, err)
		}
	}
	if full() == "" {
		t.Fatalf("n3 has room again before space was freed")
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "n3 has room", func() error {
		if r := full(); r != "" {
			return errors.New(r)
		}
		return nil
	})
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if res := c.kvctl(rctx, n1, "repair"); res.code != 0 {
		t.Fatalf("kvctl repair: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	fillUp(t, mnt)
	if err := n3.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM n3: %v", err)
	}
	if err := <-n3.done; err != nil {
		t.Fatalf("n3 on a volume with no byte left exited with %v after SIGTERM, want 0\n%s", err, crashOf(n3.log.String()))
	}
	c.mu.Lock()
	c.alive[n3] = false
	c.mu.Unlock()
	if err := os.Remove(filepath.Join(mnt, "ballast")); err != nil {
		t.Fatal(err)
	}
	missing := storeLacks(t, n3.dir, acked)
	if missing > 0 {
		t.Fatalf("n3's store lacks %d of the %d acknowledged writes", missing, len(acked))
	}
	t.Logf("n3 holds all %d acknowledged writes", len(acked))
}
