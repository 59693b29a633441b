package store

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The value log's layout, as badger v4.9.6 writes it without encryption (value.go,
// memtable.go: logFile.encodeEntry): a 20-byte file header, then entries, each a header
// (meta, user meta, then the key length, value length and expiry as uvarints), the key, the
// value and a big-endian CRC-32C of all of them. Badger truncates a file to its last entry
// when it rotates to the next; the newest file is preallocated and zero past its last entry.
const (
	vlogFileHeader  = 20
	vlogEntryHeader = 22 // the largest header: 2 bytes and three uvarints
	vlogMaxKey      = 1 << 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// verifyValueLogs checks every value-log entry in dir against its checksum before badger
// opens the log: bad names the first damaged file and why ("" when all are whole). Badger
// reads only the newest file at open, and truncates it at the first entry that does not
// check, silently: every value after it would be lost (reads of its keys fail), and the
// older files' values would be found damaged only when read. So, as for tables
// (verifyTables), damage here refuses the store, or with --recover moves it aside to be
// repaired from the peers.
//
// The newest file may end in an entry cut short by a crash: a write nobody was told
// succeeded, so not damage, provided nothing but zeros follows it. A flipped byte in that one
// last entry looks the same and is left to badger (its key's reads then fail; repair
// rewrites it).
func verifyValueLogs(dir string) (bad string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	fid := func(f string) int { n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".vlog")); return n }
	slices.SortFunc(files, func(a, b string) int { return cmp.Compare(fid(a), fid(b)) }) // badger's %06d.vlog
	for i, f := range files {
		if err := verifyValueLog(f, i == len(files)-1); err != nil {
			return fmt.Sprintf("value log %s: %v", filepath.Base(f), err)
		}
	}
	return ""
}

// verifyValueLog checks one value-log file; newest says whether it is the one badger writes to.
func verifyValueLog(path string, newest bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size < vlogFileHeader {
		if newest {
			return nil // created as a crash began, before its header: badger starts it again
		}
		return fmt.Errorf("shorter than its %d-byte header", vlogFileHeader)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	if _, err := r.Discard(vlogFileHeader); err != nil {
		return err
	}
	off := int64(vlogFileHeader)
	var entry []byte
	for {
		h, err := r.Peek(vlogEntryHeader)
		if len(h) == 0 && errors.Is(err, io.EOF) {
			return nil // the end of a file badger truncated to its last entry
		}
		klen, vlen, hlen := decodeVlogHeader(h)
		if hlen == 0 || klen == 0 || klen > vlogMaxKey {
			if !newest {
				return fmt.Errorf("no entry at offset %d, before the file's end", off)
			}
			// The end of the newest file's entries, or a header cut short by a crash.
			skip, _ := r.Discard(len(h))
			return zerosToEnd(f, r, off, off+int64(skip), size)
		}
		n := hlen + klen + vlen + 4
		if off+int64(n) > size {
			if !newest {
				return fmt.Errorf("the entry at offset %d runs past the file's end", off)
			}
			skip, _ := r.Discard(len(h))
			return zerosToEnd(f, r, off, off+int64(skip), size)
		}
		if cap(entry) < n {
			entry = make([]byte, n)
		}
		entry = entry[:n]
		got, _ := io.ReadFull(r, entry)
		if got == n && crc32.Checksum(entry[:n-4], castagnoli) == binary.BigEndian.Uint32(entry[n-4:]) {
			off += int64(n)
			continue
		}
		if !newest {
			return fmt.Errorf("the entry at offset %d does not match its checksum", off)
		}
		// Cut short by a crash when nothing but zeros follows the entry's claimed end.
		return zerosToEnd(f, r, off, off+int64(got), size)
	}
}

// decodeVlogHeader decodes an entry header from h: the key and value lengths and the
// header's own length (0 when h holds no whole header).
func decodeVlogHeader(h []byte) (klen, vlen, hlen int) {
	if len(h) < 5 {
		return 0, 0, 0
	}
	i := 2
	k, n := binary.Uvarint(h[i:])
	if n <= 0 {
		return 0, 0, 0
	}
	i += n
	v, n := binary.Uvarint(h[i:])
	if n <= 0 {
		return 0, 0, 0
	}
	i += n
	if _, n = binary.Uvarint(h[i:]); n <= 0 {
		return 0, 0, 0
	}
	if k > 1<<30 || v > 1<<30 {
		return 0, 0, 0
	}
	return int(k), int(v), i + n
}

// zerosToEnd reports damage when f holds a byte other than zero from pos, where r (reading f)
// stands, to its end: data after the entry at off, where the newest file's entries ended. It
// reads only f's data regions (SEEK_DATA): the newest file's preallocated tail, never
// written, is a hole and costs nothing.
func zerosToEnd(f *os.File, r *bufio.Reader, off, pos, size int64) error {
	damaged := func(b []byte, at int64) error {
		if i := slices.IndexFunc(b, func(c byte) bool { return c != 0 }); i >= 0 {
			return fmt.Errorf("the entry at offset %d does not check, and data follows it at %d", off, at+int64(i))
		}
		return nil
	}
	ahead, _ := r.Peek(r.Buffered())
	if err := damaged(ahead, pos); err != nil {
		return err
	}
	pos += int64(len(ahead))
	buf := make([]byte, 1<<20)
	for pos < size {
		next, err := f.Seek(pos, unix.SEEK_DATA)
		switch {
		case errors.Is(err, unix.ENXIO):
			return nil // holes to the end
		case err == nil:
			pos = next
		}
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-pos)], pos)
		if derr := damaged(buf[:n], pos); derr != nil {
			return derr
		}
		pos += int64(n)
		if err != nil || n == 0 {
			return nil
		}
	}
	return nil
}
