package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Record codec, version 1:
//
//	byte 0     version (1)
//	byte 1     flags: bit 0 = tombstone; other bits must be 0
//	bytes 2-9  timestamp, big-endian
//	bytes 10-  value (empty for a tombstone)
const (
	codecV1       = 1
	flagTombstone = 1 << 0
	knownFlags    = flagTombstone
	headerLen     = 10
)

// RecordHeaderLen is how many bytes a record's encoding adds to its value.
const RecordHeaderLen = headerLen

// Record is one version of a key: a value or a tombstone, stamped with a
// hybrid logical clock timestamp (see package hlc).
type Record struct {
	TS        uint64
	Tombstone bool
	Value     []byte // nil or empty for a tombstone
}

// Newer reports whether r wins over o under last-write-wins: the higher TS
// wins; at equal TS a tombstone beats a value, and between two values the
// one with the greater bytes wins. The order is total and deterministic, so
// every replica picks the same winner. A record is not newer than itself.
func (r Record) Newer(o Record) bool {
	if r.TS != o.TS {
		return r.TS > o.TS
	}
	if r.Tombstone != o.Tombstone {
		return r.Tombstone
	}
	return bytes.Compare(r.Value, o.Value) > 0
}

// MarshalBinary encodes r. A tombstone with a non-empty value is rejected.
func (r Record) MarshalBinary() ([]byte, error) {
	return r.AppendBinary(make([]byte, 0, headerLen+len(r.Value)))
}

// AppendBinary appends r's encoding (MarshalBinary's) to b.
func (r Record) AppendBinary(b []byte) ([]byte, error) {
	var flags byte
	if r.Tombstone {
		if len(r.Value) != 0 {
			return nil, fmt.Errorf("%w: tombstone with %d value bytes", ErrInvalidRecord, len(r.Value))
		}
		flags |= flagTombstone
	}
	b = append(b, codecV1, flags)
	b = binary.BigEndian.AppendUint64(b, r.TS)
	return append(b, r.Value...), nil
}

// UnmarshalBinary decodes data into r, copying the value. It rejects short
// input, unknown versions, unknown flags and tombstones with a value.
func (r *Record) UnmarshalBinary(data []byte) error {
	if err := r.decode(data); err != nil {
		return err
	}
	if !r.Tombstone {
		r.Value = bytes.Clone(r.Value)
		if r.Value == nil {
			r.Value = []byte{}
		}
	}
	return nil
}

// decode is UnmarshalBinary without the copy: r.Value aliases data.
// A tombstone decodes with a nil Value, a value record with a non-nil one.
func (r *Record) decode(data []byte) error {
	if len(data) < 1 {
		return fmt.Errorf("decode record: %w: %d bytes", ErrShortRecord, len(data))
	}
	if data[0] != codecV1 {
		return fmt.Errorf("decode record: %w: %d", ErrUnknownVersion, data[0])
	}
	if len(data) < headerLen {
		return fmt.Errorf("decode record: %w: %d bytes, want at least %d", ErrShortRecord, len(data), headerLen)
	}
	flags := data[1]
	if flags&^knownFlags != 0 {
		return fmt.Errorf("decode record: %w: unknown flags %#x", ErrInvalidRecord, flags)
	}
	value := data[headerLen:]
	tomb := flags&flagTombstone != 0
	if tomb {
		if len(value) != 0 {
			return fmt.Errorf("decode record: %w: tombstone with %d value bytes", ErrInvalidRecord, len(value))
		}
		value = nil
	}
	*r = Record{TS: binary.BigEndian.Uint64(data[2:headerLen]), Tombstone: tomb, Value: value}
	return nil
}
