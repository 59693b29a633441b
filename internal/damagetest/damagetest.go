// Package damagetest damages a closed badger directory the ways a disk or a crash can, for
// the tests of what opens it (the store, the hints, a kvnode process).
package damagetest

import (
	"os"
	"path/filepath"
	"testing"
)

// Largest is the largest file in dir with the extension ext ("*.sst"'s ".sst").
func Largest(t *testing.T, dir, ext string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
	best, size := "", int64(-1)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Size() > size {
			best, size = f, fi.Size()
		}
	}
	if best == "" {
		t.Fatalf("no %s file in %s", ext, dir)
	}
	return best
}

// Truncate cuts the file at path to 1/div of its size.
func Truncate(t *testing.T, path string, div int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/div); err != nil {
		t.Fatal(err)
	}
}

// RemoveManifest deletes dir's MANIFEST.
func RemoveManifest(t *testing.T, dir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, "MANIFEST")); err != nil {
		t.Fatal(err)
	}
}

// TruncateManifest cuts dir's MANIFEST to a third of its size.
func TruncateManifest(t *testing.T, dir string) { Truncate(t, filepath.Join(dir, "MANIFEST"), 3) }

// TruncateTable cuts dir's largest table to half its size.
func TruncateTable(t *testing.T, dir string) { Truncate(t, Largest(t, dir, ".sst"), 2) }

// FlipBytes flips 64 bytes of the file at path, starting at 1/div of its length.
func FlipBytes(t *testing.T, path string, div int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := len(b) / div
	for i := at; i < at+64; i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// FlipTableBytes flips 64 bytes a third of the way into dir's largest table.
func FlipTableBytes(t *testing.T, dir string) { FlipBytes(t, Largest(t, dir, ".sst"), 3) }
