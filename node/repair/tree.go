// Package repair is anti-entropy: replicas of a token range hash it into Merkle trees
// (Tree), a coordinating node compares the trees of every replica pair and has the replicas
// pull from each other only the token sub-ranges whose leaves differ (Service, a session with
// a plan, progress and a result), and each replica remembers which of its ranges a repair has
// covered and when (State), which is what lets it purge old tombstones safely (Replica).
package repair

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/cespare/xxhash/v2"

	"ringkv/node/store"
)

// MaxDepth bounds a tree's depth: at most 2^24 leaves.
const MaxDepth = 24

// Leaf is one non-empty leaf of a Tree: the records whose tokens fall into the leaf's token
// sub-interval, hashed in store order.
type Leaf struct {
	Index uint32
	// Count is the number of records hashed into the leaf (tombstones included).
	Count uint32
	// Hash is xxhash64, over each record in (token, key) order, of: the key's length (8 bytes
	// big-endian), the key, the HLC timestamp (8 bytes big-endian), the tombstone flag (1
	// byte) and xxhash64 of the value (8 bytes). Never 0 for a non-empty leaf.
	Hash uint64
}

// Tree is the Merkle tree of one token range (Start, End] at a fixed depth: 2^Depth leaves
// split the range's token interval evenly (leaf i holds the tokens Start+1+o with
// floor(o·2^Depth/width) = i, width = End-Start, the whole ring when Start == End). Only the
// non-empty leaves are kept, in index order; an inner node's hash is xxhash64 of its two
// children's hashes, an empty subtree hashing to 0. Two replicas that hold the same records
// in a range build equal trees whatever they hold outside it.
type Tree struct {
	Start, End uint64
	Depth      int
	Leaves     []Leaf
	// Keys and Bytes count the records hashed (tombstones included) and their key + value bytes.
	Keys, Bytes uint64
	// OldestTombstone is the smallest timestamp of a tombstone hashed; 0 = none.
	OldestTombstone uint64
}

// Visitor walks a token range in store order (store.Store.Visit). Safe for concurrent use.
type Visitor interface {
	Visit(ctx context.Context, start, end uint64, fn func(token uint64, key []byte, rec store.Record) error) error
}

// ClampDepth is the depth a tree of (start, end] is built at when depth is asked for: at
// least 1, at most MaxDepth, and no more leaves than the range has tokens (so that no leaf's
// token interval is empty).
func ClampDepth(start, end uint64, depth int) int {
	depth = max(1, min(depth, MaxDepth))
	if w := end - start; w != 0 {
		depth = min(depth, bits.Len64(w)-1)
	}
	return max(depth, 0)
}

// DepthFor is the depth repair builds a range's trees at for an estimate of its records:
// about 16 leaves per record, so that a leaf holding a record that differs rarely holds
// another one, and a differing leaf streams little beside what differs.
func DepthFor(keys uint64) int {
	return min(MaxDepth, max(4, bits.Len64(keys*16)))
}

// Build hashes the records of (start, end] into a tree of the given depth (ClampDepth) from
// one consistent snapshot of v. pace, when set, is called with the bytes read every 256
// records and may wait.
func Build(ctx context.Context, v Visitor, start, end uint64, depth int, pace func(ctx context.Context, n int) error) (*Tree, error) {
	t := &Tree{Start: start, End: end, Depth: ClampDepth(start, end, depth)}
	d := xxhash.New()
	var cur Leaf
	have := false
	var buf [8 + 8 + 1 + 8]byte
	pending, n := 0, 0
	flush := func() {
		if have {
			cur.Hash = d.Sum64()
			if cur.Hash == 0 {
				cur.Hash = 1
			}
			t.Leaves = append(t.Leaves, cur)
		}
	}
	err := v.Visit(ctx, start, end, func(token uint64, key []byte, rec store.Record) error {
		i := t.LeafOf(token)
		if !have || i != cur.Index {
			flush()
			cur, have = Leaf{Index: i}, true
			d.Reset()
		}
		binary.BigEndian.PutUint64(buf[0:8], uint64(len(key)))
		d.Write(buf[0:8])
		d.Write(key)
		binary.BigEndian.PutUint64(buf[0:8], rec.TS)
		buf[8] = 0
		if rec.Tombstone {
			buf[8] = 1
			if t.OldestTombstone == 0 || rec.TS < t.OldestTombstone {
				t.OldestTombstone = rec.TS
			}
		}
		binary.BigEndian.PutUint64(buf[9:17], xxhash.Sum64(rec.Value))
		d.Write(buf[0:17])
		cur.Count++
		t.Keys++
		sz := len(key) + len(rec.Value)
		t.Bytes += uint64(sz)
		pending += sz
		if n++; pace != nil && n%256 == 0 {
			if err := pace(ctx, pending); err != nil {
				return err
			}
			pending = 0
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("build tree %s: %w", fmtRange(start, end), err)
	}
	flush()
	return t, nil
}

// width is the number of tokens in the range; 0 stands for 2^64 (the whole ring).
func (t *Tree) width() uint64 { return t.End - t.Start }

// LeafOf is the index of the leaf a token of the range falls into.
func (t *Tree) LeafOf(token uint64) uint32 {
	off := token - t.Start - 1
	w := t.width()
	if w == 0 {
		return uint32(off >> (64 - t.Depth))
	}
	hi, lo := bits.Mul64(off, 1<<t.Depth)
	q, _ := bits.Div64(hi, lo, w)
	return uint32(q)
}

// bound is the offset of the first token of leaf i (ceil(i·width/2^Depth)); bound(2^Depth)
// is width (0 for the whole ring).
func (t *Tree) bound(i uint64) uint64 {
	w := t.width()
	if i >= 1<<t.Depth {
		return w
	}
	if w == 0 {
		return i << (64 - t.Depth)
	}
	hi, lo := bits.Mul64(i, w)
	q, r := bits.Div64(hi, lo, 1<<t.Depth)
	if r != 0 {
		q++
	}
	return q
}

// LeafRange is the token range (start, end] of the leaves first..last (inclusive).
func (t *Tree) LeafRange(first, last uint32) (start, end uint64) {
	return t.Start + t.bound(uint64(first)), t.Start + t.bound(uint64(last)+1)
}

// Root is the tree's root hash (0 for an empty range).
func (t *Tree) Root() uint64 { return subtreeHash(t.Leaves, t.Depth) }

// subtreeHash hashes the leaves of one subtree of the given height (leaves sorted, all
// within the subtree); an empty subtree is 0.
func subtreeHash(leaves []Leaf, height int) uint64 {
	if len(leaves) == 0 {
		return 0
	}
	if height == 0 {
		return leaves[0].Hash
	}
	// Split by the bit that selects the left or right child at this height.
	bit := uint32(1) << (height - 1)
	split := len(leaves)
	for i, l := range leaves {
		if l.Index&bit != 0 {
			split = i
			break
		}
	}
	return inner(subtreeHash(leaves[:split], height-1), subtreeHash(leaves[split:], height-1))
}

func inner(l, r uint64) uint64 {
	if l == 0 && r == 0 {
		return 0
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], l)
	binary.BigEndian.PutUint64(b[8:], r)
	return xxhash.Sum64(b[:])
}

// LeafDiff is a leaf whose hashes differ between two trees, with each side's record count.
type LeafDiff struct {
	Index          uint32
	CountA, CountB uint32
}

// Diff compares two trees of the same range and depth and returns the leaves that differ,
// in index order. It descends from the root into the subtrees whose hashes differ only, so
// equal halves cost one hash comparison each.
func Diff(a, b *Tree) ([]LeafDiff, error) {
	if a.Start != b.Start || a.End != b.End || a.Depth != b.Depth {
		return nil, fmt.Errorf("%w: %s depth %d vs %s depth %d", ErrTreeMismatch,
			fmtRange(a.Start, a.End), a.Depth, fmtRange(b.Start, b.End), b.Depth)
	}
	var out []LeafDiff
	var walk func(la, lb []Leaf, height int)
	walk = func(la, lb []Leaf, height int) {
		if subtreeHash(la, height) == subtreeHash(lb, height) {
			return
		}
		if height == 0 {
			d := LeafDiff{}
			if len(la) > 0 {
				d.Index, d.CountA = la[0].Index, la[0].Count
			}
			if len(lb) > 0 {
				d.Index, d.CountB = lb[0].Index, lb[0].Count
			}
			out = append(out, d)
			return
		}
		bit := uint32(1) << (height - 1)
		sa, sb := splitAt(la, bit), splitAt(lb, bit)
		walk(la[:sa], lb[:sb], height-1)
		walk(la[sa:], lb[sb:], height-1)
	}
	walk(a.Leaves, b.Leaves, a.Depth)
	return out, nil
}

func splitAt(leaves []Leaf, bit uint32) int {
	for i, l := range leaves {
		if l.Index&bit != 0 {
			return i
		}
	}
	return len(leaves)
}

// Span is a token range (Start, End] of a repair: a run of adjacent leaves.
type Span struct{ Start, End uint64 }

// Spans turns sorted leaf indexes into the token ranges of their runs of adjacent leaves.
func (t *Tree) Spans(leaves []uint32) []Span {
	var out []Span
	for i := 0; i < len(leaves); {
		j := i
		for j+1 < len(leaves) && leaves[j+1] == leaves[j]+1 {
			j++
		}
		s, e := t.LeafRange(leaves[i], leaves[j])
		out = append(out, Span{s, e})
		i = j + 1
	}
	return out
}

// leafBytes is the size of one leaf in EncodeLeaves.
const leafBytes = 16

// EncodeLeaves packs leaves for the wire (kvpb.RangeTreeResponse.leaves): 16 bytes each,
// big-endian index (4), count (4), hash (8).
func EncodeLeaves(leaves []Leaf) []byte {
	b := make([]byte, 0, len(leaves)*leafBytes)
	for _, l := range leaves {
		b = binary.BigEndian.AppendUint32(b, l.Index)
		b = binary.BigEndian.AppendUint32(b, l.Count)
		b = binary.BigEndian.AppendUint64(b, l.Hash)
	}
	return b
}

// DecodeLeaves unpacks EncodeLeaves, checking the length, the order of the indexes and
// that each lies below 2^depth.
func DecodeLeaves(b []byte, depth int) ([]Leaf, error) {
	if len(b)%leafBytes != 0 || depth < 0 || depth > MaxDepth {
		return nil, fmt.Errorf("%w: %d leaf bytes at depth %d", ErrTreeMismatch, len(b), depth)
	}
	out := make([]Leaf, 0, len(b)/leafBytes)
	for ; len(b) > 0; b = b[leafBytes:] {
		l := Leaf{Index: binary.BigEndian.Uint32(b), Count: binary.BigEndian.Uint32(b[4:]), Hash: binary.BigEndian.Uint64(b[8:])}
		if uint64(l.Index) >= 1<<depth || (len(out) > 0 && l.Index <= out[len(out)-1].Index) {
			return nil, fmt.Errorf("%w: leaf %d out of order at depth %d", ErrTreeMismatch, l.Index, depth)
		}
		out = append(out, l)
	}
	return out, nil
}

// Node is a non-empty inner node of a Tree at some level (level 0 is the root, level Depth
// the leaves): its index among the 2^level nodes of the level, and its hash.
type Node struct {
	Index uint32
	Hash  uint64
}

// Level returns the non-empty nodes at level (capped at Depth), in index order.
func (t *Tree) Level(level int) []Node {
	level = min(max(level, 0), t.Depth)
	shift := t.Depth - level
	var out []Node
	for i := 0; i < len(t.Leaves); {
		j := i
		idx := t.Leaves[i].Index >> shift
		for j < len(t.Leaves) && t.Leaves[j].Index>>shift == idx {
			j++
		}
		out = append(out, Node{Index: idx, Hash: subtreeHash(t.Leaves[i:j], shift)})
		i = j
	}
	return out
}

// Under returns the leaves under the given nodes of level (sorted indexes), in index order.
func (t *Tree) Under(level int, nodes []uint32) []Leaf {
	level = min(max(level, 0), t.Depth)
	shift := t.Depth - level
	var out []Leaf
	for _, l := range t.Leaves {
		if _, ok := slices.BinarySearch(nodes, l.Index>>shift); ok {
			out = append(out, l)
		}
	}
	return out
}

// DiffNodes returns the indexes of the nodes that differ between two levels' node lists
// (present in one only, or with different hashes), in index order.
func DiffNodes(a, b []Node) []uint32 {
	var out []uint32
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].Index < b[j].Index):
			out = append(out, a[i].Index)
			i++
		case i == len(a) || b[j].Index < a[i].Index:
			out = append(out, b[j].Index)
			j++
		default:
			if a[i].Hash != b[j].Hash {
				out = append(out, a[i].Index)
			}
			i++
			j++
		}
	}
	return out
}

// nodeBytes is the size of one node in EncodeNodes.
const nodeBytes = 12

// EncodeNodes packs nodes for the wire (kvpb.RangeTreeResponse.nodes): 12 bytes each,
// big-endian index (4), hash (8).
func EncodeNodes(nodes []Node) []byte {
	b := make([]byte, 0, len(nodes)*nodeBytes)
	for _, n := range nodes {
		b = binary.BigEndian.AppendUint32(b, n.Index)
		b = binary.BigEndian.AppendUint64(b, n.Hash)
	}
	return b
}

// DecodeNodes unpacks EncodeNodes, checking the length, the order and the range of the indexes.
func DecodeNodes(b []byte, level int) ([]Node, error) {
	if len(b)%nodeBytes != 0 || level < 0 || level > MaxDepth {
		return nil, fmt.Errorf("%w: %d node bytes at level %d", ErrTreeMismatch, len(b), level)
	}
	out := make([]Node, 0, len(b)/nodeBytes)
	for ; len(b) > 0; b = b[nodeBytes:] {
		n := Node{Index: binary.BigEndian.Uint32(b), Hash: binary.BigEndian.Uint64(b[4:])}
		if uint64(n.Index) >= 1<<level || (len(out) > 0 && n.Index <= out[len(out)-1].Index) {
			return nil, fmt.Errorf("%w: node %d out of order at level %d", ErrTreeMismatch, n.Index, level)
		}
		out = append(out, n)
	}
	return out, nil
}

// SummaryLevel is the level whose nodes a coordinator compares first for a tree of depth
// over about keys records: about 8 records under each node, so that the summary is small
// and a differing node's leaves are few.
func SummaryLevel(depth int, keys uint64) int {
	return min(depth, max(0, bits.Len64(keys/8)))
}
