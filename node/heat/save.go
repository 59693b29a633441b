package heat

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// FileName is the history's file in Config.Dir.
const FileName = "heat.bin"

// The file's formats: 2 adds each step's owners (and the names they refer to) to 1, which is
// still read (its steps' owners unknown).
const (
	magic   = "RKVHEAT2"
	magicV1 = "RKVHEAT1"
)

// Open returns a History of cfg holding what was saved in cfg.Dir. A missing file is an empty
// history; a file that cannot be read (damaged, or saved with other tiers) is set aside as
// heat.bin.bad, and the error says so while the History returned starts empty.
func Open(cfg Config) (*History, error) {
	h := New(cfg)
	if cfg.Dir == "" {
		return h, nil
	}
	path := filepath.Join(cfg.Dir, FileName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("open heat history: %w", err)
	}
	err = h.load(f)
	f.Close()
	if err != nil {
		h = New(cfg)
		if rerr := os.Rename(path, path+".bad"); rerr != nil {
			return h, fmt.Errorf("heat history %s unreadable (%v), and not set aside: %w", path, err, rerr)
		}
		return h, fmt.Errorf("heat history %s unreadable, set aside as %s.bad, starting empty: %w", path, FileName, err)
	}
	return h, nil
}

// Save writes the history to Dir/heat.bin (through a temporary file and a rename, so a crash
// leaves the previous save). The live step is not saved: after a restart it is "no data".
func (h *History) Save() error {
	if h.cfg.Dir == "" {
		return nil
	}
	path := filepath.Join(h.cfg.Dir, FileName)
	tmp, err := os.CreateTemp(h.cfg.Dir, FileName+".*")
	if err != nil {
		return fmt.Errorf("save heat history: %w", err)
	}
	defer os.Remove(tmp.Name())
	zw, _ := gzip.NewWriterLevel(tmp, gzip.BestSpeed)
	bw := bufio.NewWriterSize(zw, 1<<16)
	h.mu.Lock()
	err = h.write(bw)
	h.mu.Unlock()
	for _, step := range []func() error{bw.Flush, zw.Close, tmp.Sync, tmp.Close} {
		if err != nil {
			break
		}
		err = step()
	}
	if err != nil {
		tmp.Close()
		return fmt.Errorf("save heat history: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save heat history: %w", err)
	}
	return nil
}

// write encodes the tiers and events; h.mu is held.
func (h *History) write(w *bufio.Writer) error {
	var buf []byte
	buf = append(buf, magic...)
	buf = binary.AppendUvarint(buf, uint64(len(h.tiers)))
	for _, t := range h.tiers {
		buf = binary.AppendUvarint(buf, uint64(t.Step))
		buf = binary.AppendUvarint(buf, uint64(t.Len))
	}
	buf = binary.AppendUvarint(buf, uint64(len(h.names)))
	for _, n := range h.names {
		buf = binary.AppendUvarint(buf, uint64(len(n)))
		buf = append(buf, n...)
	}
	if _, err := w.Write(buf); err != nil {
		return err
	}
	for _, t := range h.tiers {
		for i, s := range t.stamps {
			buf = binary.AppendVarint(buf[:0], s)
			if s >= 0 {
				for _, c := range t.cells[i*Buckets : (i+1)*Buckets] {
					buf = binary.AppendUvarint(buf, uint64(c.Reads))
					buf = binary.AppendUvarint(buf, uint64(c.Writes))
					buf = binary.AppendUvarint(buf, uint64(c.Bytes))
					buf = binary.AppendUvarint(buf, uint64(c.Errors))
					buf = binary.AppendUvarint(buf, uint64(c.ReadP99))
					buf = binary.AppendUvarint(buf, uint64(c.WriteP99))
				}
				buf = append(buf, t.owners[i*Buckets:(i+1)*Buckets]...)
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
	}
	buf = binary.AppendUvarint(buf[:0], uint64(h.evLen))
	for i := range h.evLen {
		e := h.events[(h.evNext-h.evLen+i+len(h.events))%len(h.events)]
		buf = binary.AppendVarint(buf, e.Time.UnixNano())
		buf = binary.AppendUvarint(buf, uint64(len(e.Kind)))
		buf = append(buf, e.Kind...)
		buf = binary.AppendUvarint(buf, uint64(len(e.Text)))
		buf = append(buf, e.Text...)
	}
	_, err := w.Write(buf)
	return err
}

func (h *History) load(r io.Reader) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	br := bufio.NewReader(zr)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(br, head); err != nil || string(head) != magic && string(head) != magicV1 {
		return fmt.Errorf("not a heat history")
	}
	withOwners := string(head) == magic
	u := func() uint64 {
		v, e := binary.ReadUvarint(br)
		if err == nil {
			err = e
		}
		return v
	}
	n := u()
	if err != nil || n != uint64(len(h.tiers)) {
		return fmt.Errorf("saved with %d tiers, want %d", n, len(h.tiers))
	}
	for _, t := range h.tiers {
		if step, l := time.Duration(u()), int(u()); step != t.Step || l != t.Len {
			return fmt.Errorf("saved tier %v x %d, want %v x %d", step, l, t.Step, t.Len)
		}
	}
	var names []string
	if withOwners {
		nn := u()
		if err != nil || nn > MaxOwners {
			return fmt.Errorf("saved with %d owners, want at most %d", nn, MaxOwners)
		}
		for range nn {
			name := make([]byte, min(u(), MaxOwnerName))
			if _, e := io.ReadFull(br, name); e != nil {
				return e
			}
			names = append(names, string(name))
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// The saved owners' numbers, as this history numbers them.
	renum := [MaxOwners + 1]uint8{}
	for i, n := range names {
		renum[i+1] = h.intern(n)
	}
	cur := h.advanced.Load()
	for ti := range h.tiers {
		t := &h.tiers[ti]
		ratio := int64(t.Step / h.base)
		for i := range t.stamps {
			s, e := binary.ReadVarint(br)
			if e != nil {
				return e
			}
			if s < 0 {
				continue
			}
			var cells [Buckets]Cell
			for b := range cells {
				c := &cells[b]
				c.Reads, c.Writes, c.Bytes, c.Errors = uint32(u()), uint32(u()), uint32(u()), uint32(u())
				c.ReadP99, c.WriteP99 = uint16(u()), uint16(u())
			}
			var owners [Buckets]uint8
			if withOwners {
				if _, e := io.ReadFull(br, owners[:]); e != nil {
					return e
				}
				for b, o := range owners {
					owners[b] = renum[o]
				}
			}
			if err != nil {
				return err
			}
			// A slot this run already stamped (the step the node started in) keeps its own
			// count unless it is the same step, which then adds up.
			if s > floorDiv(cur, ratio) || i != int(((s%int64(t.Len))+int64(t.Len))%int64(t.Len)) {
				continue
			}
			if t.stamps[i] > s {
				continue
			}
			if t.stamps[i] != s {
				t.stamps[i] = s
				clear(t.cells[i*Buckets : (i+1)*Buckets])
				copy(t.owners[i*Buckets:(i+1)*Buckets], owners[:])
			}
			for b, c := range cells {
				d := &t.cells[i*Buckets+b]
				d.Reads, d.Writes = sat(d.Reads, uint64(c.Reads)), sat(d.Writes, uint64(c.Writes))
				d.Bytes, d.Errors = sat(d.Bytes, uint64(c.Bytes)), sat(d.Errors, uint64(c.Errors))
				d.ReadP99, d.WriteP99 = max(d.ReadP99, c.ReadP99), max(d.WriteP99, c.WriteP99)
			}
		}
	}
	ne := u()
	if err != nil {
		return err
	}
	var evs []Event
	for range ne {
		ns, e := binary.ReadVarint(br)
		if e != nil {
			return e
		}
		kind := make([]byte, min(u(), MaxEventKind))
		if _, e := io.ReadFull(br, kind); e != nil {
			return e
		}
		text := make([]byte, min(u(), MaxEventText))
		if _, e := io.ReadFull(br, text); e != nil {
			return e
		}
		if err != nil {
			return err
		}
		evs = append(evs, Event{Time: time.Unix(0, ns), Kind: string(kind), Text: string(text)})
	}
	// Saved events come before any of this run.
	for i := range h.evLen {
		evs = append(evs, h.events[(h.evNext-h.evLen+i+len(h.events))%len(h.events)])
	}
	if len(h.events) == 0 {
		return nil
	}
	if len(evs) > len(h.events) {
		evs = evs[len(evs)-len(h.events):]
	}
	clear(h.events)
	copy(h.events, evs)
	h.evLen = len(evs)
	h.evNext = len(evs) % len(h.events)
	return nil
}
