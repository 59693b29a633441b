package repair

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"ringkv/node/ring"
	"ringkv/node/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.Dir = t.TempDir()
	s, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func put(t *testing.T, s *store.Store, token uint64, key string, rec store.Record) {
	t.Helper()
	if _, err := s.Apply(token, []byte(key), rec); err != nil {
		t.Fatal(err)
	}
}

func build(t *testing.T, s *store.Store, start, end uint64, depth int) *Tree {
	t.Helper()
	tr, err := Build(context.Background(), s, start, end, depth, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func val(v string) store.Record { return store.Record{TS: 100, Value: []byte(v)} }

func TestEqualDataEqualRoots(t *testing.T) {
	a, b := openStore(t), openStore(t)
	keys := make([]string, 500)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%04d", i)
	}
	for _, k := range keys {
		put(t, a, ring.Token([]byte(k)), k, val(k))
	}
	// The same records, written in another order, with older versions first on b.
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		put(t, b, ring.Token([]byte(k)), k, store.Record{TS: 50, Value: []byte("old")})
		put(t, b, ring.Token([]byte(k)), k, val(k))
	}
	for _, rg := range []Span{{0, 0}, {1 << 62, 3 << 62}, {3 << 62, 1 << 62}} {
		ta, tb := build(t, a, rg.Start, rg.End, 10), build(t, b, rg.Start, rg.End, 10)
		if ta.Root() == 0 || ta.Root() != tb.Root() {
			t.Errorf("%s: roots %x and %x, want equal and non-zero", fmtRange(rg.Start, rg.End), ta.Root(), tb.Root())
		}
		if d, _ := Diff(ta, tb); len(d) != 0 {
			t.Errorf("%s: %d leaves differ, want 0", fmtRange(rg.Start, rg.End), len(d))
		}
	}
	if got := build(t, openStore(t), 0, 0, 10).Root(); got != 0 {
		t.Errorf("empty root %x, want 0", got)
	}
}

// TestOneDifferingKeyStreamsItsLeaf: one key that differs makes exactly its leaf differ, and
// the spans to stream are exactly that leaf's token range: what a scan of them returns is the
// key and the other records of its leaf, nothing else.
func TestOneDifferingKeyStreamsItsLeaf(t *testing.T) {
	cases := []struct {
		name string
		b    func(s *store.Store, token uint64, key string)
	}{
		{"missing", func(*store.Store, uint64, string) {}},
		{"older", func(s *store.Store, tok uint64, k string) { put(t, s, tok, k, store.Record{TS: 99, Value: []byte(k)}) }},
		{"other value", func(s *store.Store, tok uint64, k string) {
			put(t, s, tok, k, store.Record{TS: 100, Value: []byte("x")})
		}},
		{"tombstone", func(s *store.Store, tok uint64, k string) { put(t, s, tok, k, store.Record{TS: 100, Tombstone: true}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := openStore(t), openStore(t)
			const odd = "k0123"
			for i := range 2000 {
				k := fmt.Sprintf("k%04d", i)
				tok := ring.Token([]byte(k))
				put(t, a, tok, k, val(k))
				if k == odd {
					c.b(b, tok, k)
				} else {
					put(t, b, tok, k, val(k))
				}
			}
			start, end := uint64(0), uint64(0)
			ta, tb := build(t, a, start, end, DepthFor(2000)), build(t, b, start, end, DepthFor(2000))
			d, err := Diff(ta, tb)
			if err != nil {
				t.Fatal(err)
			}
			tok := ring.Token([]byte(odd))
			if len(d) != 1 || d[0].Index != ta.LeafOf(tok) {
				t.Fatalf("diff %+v, want only leaf %d", d, ta.LeafOf(tok))
			}
			spans := ta.Spans([]uint32{d[0].Index})
			var got []string
			for _, sp := range spans {
				if err := a.Scan(context.Background(), sp.Start, sp.End, nil, func(_, key []byte, _ store.Record) error {
					got = append(got, string(key))
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			var want []string
			for i := range 2000 {
				k := fmt.Sprintf("k%04d", i)
				if ta.LeafOf(ring.Token([]byte(k))) == d[0].Index {
					want = append(want, k)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) || !slices.Contains(got, odd) {
				t.Errorf("streamed %v, want %v (the leaf of %s)", got, want, odd)
			}
		})
	}
}

func TestTombstoneVersusMissingDiffers(t *testing.T) {
	a, b := openStore(t), openStore(t)
	put(t, a, 1000, "gone", store.Record{TS: 5, Tombstone: true})
	ta, tb := build(t, a, 0, 0, 8), build(t, b, 0, 0, 8)
	d, _ := Diff(ta, tb)
	if ta.Root() == tb.Root() || len(d) != 1 || d[0].CountA != 1 || d[0].CountB != 0 {
		t.Errorf("tombstone vs missing: roots %x %x, diff %+v; want one leaf differing (1 vs 0)", ta.Root(), tb.Root(), d)
	}
}

// TestTreesAgreeAcrossVnodeBoundaries: a replica that also holds the neighbouring vnodes'
// ranges builds the same tree for a range as one that holds only that range, including keys
// on the boundary tokens themselves (end belongs to the range, start to the one before).
func TestTreesAgreeAcrossVnodeBoundaries(t *testing.T) {
	const lo, mid, hi = uint64(1) << 40, uint64(1) << 50, uint64(1) << 60
	a, b := openStore(t), openStore(t)
	in := []uint64{lo + 1, lo + 2, mid - 1, mid, mid + 1, hi - 1, hi}
	out := []uint64{0, lo - 1, lo, hi + 1, ^uint64(0)}
	for i, tok := range in {
		k := fmt.Sprintf("in%d", i)
		put(t, a, tok, k, val(k))
		put(t, b, tok, k, val(k))
	}
	for i, tok := range out {
		k := fmt.Sprintf("out%d", i)
		put(t, a, tok, k, val(k))
	}
	for _, depth := range []int{1, 4, 12, MaxDepth} {
		ta, tb := build(t, a, lo, hi, depth), build(t, b, lo, hi, depth)
		if ta.Root() != tb.Root() || ta.Keys != uint64(len(in)) {
			t.Errorf("depth %d: roots %x vs %x, keys %d; want equal roots over %d keys", depth, ta.Root(), tb.Root(), ta.Keys, len(in))
		}
	}
	// Split at mid into two neighbouring vnodes: each agrees with b's, and together they
	// hold every record of the range once.
	l, r := build(t, a, lo, mid, 8), build(t, a, mid, hi, 8)
	bl, br := build(t, b, lo, mid, 8), build(t, b, mid, hi, 8)
	if l.Root() != bl.Root() || r.Root() != br.Root() || l.Keys+r.Keys != uint64(len(in)) {
		t.Errorf("split at mid: roots %x/%x %x/%x, keys %d+%d; want equal, %d in all", l.Root(), bl.Root(), r.Root(), br.Root(), l.Keys, r.Keys, len(in))
	}
}

// TestLeafRanges: the leaves' token ranges tile the range, and each holds exactly the tokens
// LeafOf maps to it (wrapping ranges and the whole ring included).
func TestLeafRanges(t *testing.T) {
	for _, rg := range []Span{{0, 0}, {100, 100 + 1000}, {^uint64(0) - 500, 700}, {1 << 63, 1<<63 + 3}, {7, 6}} {
		for _, depth := range []int{1, 3, 10, MaxDepth} {
			tr := &Tree{Start: rg.Start, End: rg.End, Depth: ClampDepth(rg.Start, rg.End, depth)}
			prevEnd := rg.Start
			n := uint32(1) << tr.Depth
			for i := uint32(0); i < n; i += max(1, n/64) {
				s, e := tr.LeafRange(i, i)
				if i == 0 && s != rg.Start {
					t.Fatalf("%s depth %d: leaf 0 starts at %d", fmtRange(rg.Start, rg.End), tr.Depth, s)
				}
				if got := tr.LeafOf(s + 1); got != i {
					t.Errorf("%s depth %d: first token of leaf %d maps to %d", fmtRange(rg.Start, rg.End), tr.Depth, i, got)
				}
				if got := tr.LeafOf(e); got != i {
					t.Errorf("%s depth %d: last token of leaf %d maps to %d", fmtRange(rg.Start, rg.End), tr.Depth, i, got)
				}
				if n/64 <= 1 && i > 0 && s != prevEnd {
					t.Errorf("%s depth %d: leaf %d starts at %d, previous ended at %d", fmtRange(rg.Start, rg.End), tr.Depth, i, s, prevEnd)
				}
				prevEnd = e
			}
			if _, e := tr.LeafRange(n-1, n-1); e != rg.End {
				t.Errorf("%s depth %d: last leaf ends at %d", fmtRange(rg.Start, rg.End), tr.Depth, e)
			}
		}
	}
}

// TestDescentFindsTheSameLeaves: comparing one level's nodes and then only the leaves under
// the nodes that differ finds exactly the leaves a full comparison finds; level 0 is the root.
func TestDescentFindsTheSameLeaves(t *testing.T) {
	a, b := openStore(t), openStore(t)
	for i := range 3000 {
		k := fmt.Sprintf("k%05d", i)
		tok := ring.Token([]byte(k))
		put(t, a, tok, k, val(k))
		if i%97 != 0 {
			put(t, b, tok, k, val(k))
		}
	}
	depth := DepthFor(3000)
	ta, tb := build(t, a, 0, 0, depth), build(t, b, 0, 0, depth)
	full, _ := Diff(ta, tb)
	if len(full) == 0 {
		t.Fatal("no difference to find")
	}
	if r := ta.Level(0); len(r) != 1 || r[0].Hash != ta.Root() {
		t.Errorf("level 0: %v, want the root %x", r, ta.Root())
	}
	for _, level := range []int{0, 3, SummaryLevel(depth, 3000), depth} {
		enc, err := DecodeNodes(EncodeNodes(ta.Level(level)), min(level, depth))
		if err != nil {
			t.Fatal(err)
		}
		under := DiffNodes(enc, tb.Level(level))
		pa := &Tree{Start: 0, End: 0, Depth: depth, Leaves: ta.Under(level, under)}
		pb := &Tree{Start: 0, End: 0, Depth: depth, Leaves: tb.Under(level, under)}
		got, _ := Diff(pa, pb)
		if fmt.Sprint(got) != fmt.Sprint(full) {
			t.Errorf("level %d: descent found %d leaves, full comparison %d", level, len(got), len(full))
		}
		if level == SummaryLevel(depth, 3000) && len(pa.Leaves) > len(ta.Leaves)/4 {
			t.Errorf("level %d: %d of %d leaves sent for %d differing; want few", level, len(pa.Leaves), len(ta.Leaves), len(full))
		}
	}
}
