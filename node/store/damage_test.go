package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"ringkv/internal/damagetest"
)

// filled writes n records into a new store in dir and closes it, leaving tables on disk.
func filled(t *testing.T, dir string, n int) {
	t.Helper()
	cfg := testConfig(dir)
	cfg.Badger = func(o badger.Options) badger.Options {
		return o.WithMemTableSize(1 << 20).WithNumMemtables(2).WithBlockCacheSize(1 << 20).WithBaseTableSize(256 << 10).WithValueThreshold(64 << 10)
	}
	s := openTest(t, cfg)
	value := strings.Repeat("v", 1000)
	for i := range n {
		key := fmt.Sprintf("key-%05d", i)
		if _, err := s.Apply(uint64(i)*7919, []byte(key), val(uint64(i+1), value+key)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDamageDetected: each kind of damage made to a closed store's directory makes Open
// fail with ErrDamaged and a one-line reason (no panic, no store that opens emptier than it
// closed); with Recover it opens and Damage says what was found.
func TestDamageDetected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"manifest deleted", damagetest.RemoveManifest},
		{"manifest truncated", damagetest.TruncateManifest},
		{"sst bytes flipped", damagetest.FlipTableBytes},
		{"sst truncated to half", damagetest.TruncateTable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			filled(t, dir, 3000)
			tc.damage(t, dir)

			s, err := Open(testConfig(dir))
			if err == nil {
				n := s.KeyCount()
				s.Close()
				t.Fatalf("Open of a damaged store: got a store of %d keys, want ErrDamaged", n)
			}
			if !errors.Is(err, ErrDamaged) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Open of a damaged store: got %q, want one line wrapping ErrDamaged", err)
			}
			t.Logf("refused: %v", err)

			cfg := testConfig(dir)
			cfg.Recover = true
			s = openTest(t, cfg)
			if s.Damage() == "" {
				t.Fatalf("Damage after Open with Recover: got \"\", want what was found")
			}
			if _, err := s.Apply(1, []byte("after"), val(1<<40, "x")); err != nil {
				t.Fatalf("Apply after recovering: %v", err)
			}
			s.Close()
			// Recovered: the next Open finds the store as it was left, its marks kept until
			// the ranges are repaired.
			s = openTest(t, testConfig(dir))
			if d := s.Damage(); d == "" || !s.Damaged(0) || !s.Damaged(^uint64(0)) {
				t.Fatalf("a recovered store reopened before repair: got Damage %q, marked %v, want what was found and every token marked", d, s.DamagedSpans())
			}
		})
	}
}

// TestUnlistedTableIgnored: a table the MANIFEST does not list — what a flush or a compaction
// was writing when the process was killed: zero-filled, half-written — is not damage: the
// store opens with every key and no damage report (badger deletes the file).
func TestUnlistedTableIgnored(t *testing.T) {
	dir := t.TempDir()
	filled(t, dir, 3000)
	largest := damagetest.Largest(t, dir, ".sst")
	half, err := os.ReadFile(largest)
	if err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(dir, "999999.sst")
	if err := os.WriteFile(stray, half[:len(half)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "999998.sst"), make([]byte, 1<<16), 0o644); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, testConfig(dir))
	defer s.Close()
	if d := s.Damage(); d != "" {
		t.Fatalf("a store with a table its MANIFEST does not list: got damage %q, want none", d)
	}
	if n := s.KeyCount(); n != 3000 {
		t.Fatalf("got %d keys, want 3000", n)
	}
}

// TestUndamagedReopens: a store closed and opened again, and one whose range was deleted,
// opens without a damage report (the sidecar's mark goes down before the keys do).
func TestUndamagedReopens(t *testing.T) {
	dir := t.TempDir()
	filled(t, dir, 500)
	s := openTest(t, testConfig(dir))
	if err := s.DeleteRange(0, 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, testConfig(dir))
	if got := s.KeyCount(); got != 0 {
		t.Fatalf("keys after DeleteRange of the whole ring: got %d, want 0", got)
	}
}

// TestDamagedMarksPersist: the spans a recovered store marks damaged survive a restart, are
// cleared range by range (a wrapping range included), and once none is left the damage is
// gone, also after the next restart; a range cleared without a repair keeps the damage said.
func TestDamagedMarksPersist(t *testing.T) {
	for _, repaired := range []bool{true, false} {
		t.Run(fmt.Sprintf("repaired=%v", repaired), func(t *testing.T) {
			dir := t.TempDir()
			filled(t, dir, 300)
			if err := os.Remove(filepath.Join(dir, "MANIFEST")); err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(dir)
			cfg.Recover = true
			s := openTest(t, cfg)
			s.Close()

			s = openTest(t, testConfig(dir))
			const q = 1 << 62 // a quarter of the token space
			for _, tok := range []uint64{0, q, 3 * q, ^uint64(0)} {
				if !s.Damaged(tok) {
					t.Fatalf("token %x after a restart: got unmarked, want marked", tok)
				}
			}
			// (q, 3q] repaired: its tokens unmarked, the rest still marked.
			if err := s.ClearDamaged(q, 3*q, true); err != nil {
				t.Fatal(err)
			}
			if s.Damaged(q+1) || s.Damaged(3*q) || !s.Damaged(q) || !s.Damaged(3*q+1) {
				t.Fatalf("after clearing (q, 3q]: got %v, want [0, q] and (3q, max] marked", s.DamagedSpans())
			}
			if !s.DamagedIn(3*q, q) || s.DamagedIn(q, 3*q) {
				t.Fatalf("DamagedIn after clearing (q, 3q]: got %v", s.DamagedSpans())
			}
			s.Close()
			s = openTest(t, testConfig(dir))
			if got := s.DamagedSpans(); len(got) != 2 || s.Damage() == "" {
				t.Fatalf("after a restart: got spans %v damage %q, want two spans and the damage", got, s.Damage())
			}
			// The wrapping range (3q, q] is the rest.
			if err := s.ClearDamaged(3*q, q, repaired); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s = openTest(t, testConfig(dir))
			defer s.Close()
			if got := s.DamagedSpans(); len(got) != 0 || s.Damaged(0) {
				t.Fatalf("after clearing every range and a restart: got spans %v, want none", got)
			}
			if d := s.Damage(); (d == "") != repaired {
				t.Fatalf("Damage after every range cleared (repaired %v): got %q", repaired, d)
			}
		})
	}
}

func TestTokenSpans(t *testing.T) {
	const m = ^uint64(0)
	for _, tc := range []struct {
		name string
		got  []TokenSpan
		want []TokenSpan
	}{
		{"subtract middle", subtract(allTokens, 10, 20), []TokenSpan{{0, 9}, {21, m}}},
		{"subtract top", subtract(allTokens, 10, m), []TokenSpan{{0, 9}}},
		{"subtract all", subtract(allTokens, 0, m), []TokenSpan{}},
		{"subtract outside", subtract([]TokenSpan{{5, 9}}, 10, 20), []TokenSpan{{5, 9}}},
		{"union adjacent", union([]TokenSpan{{0, 9}}, []TokenSpan{{10, 20}}), []TokenSpan{{0, 20}}},
		{"union apart", union([]TokenSpan{{30, m}}, []TokenSpan{{0, 9}}), []TokenSpan{{0, 9}, {30, m}}},
		{"union top", union([]TokenSpan{{0, m}}, []TokenSpan{{0, m}}), []TokenSpan{{0, m}}},
	} {
		if fmt.Sprint(tc.got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
