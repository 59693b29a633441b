package stream

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"

	"ringkv/proto/kvpb"
)

// ChunkChecksum is the checksum of a RangeChunk: xxhash64 over, for each record in order,
// the key's length (8 bytes big-endian), the key, and the record's binary encoding
// (store.Record.MarshalBinary). Receivers recompute it to verify a chunk.
func ChunkChecksum(records []*kvpb.KeyRecord) uint64 {
	d := xxhash.New()
	var hdr [10]byte
	for _, kr := range records {
		binary.BigEndian.PutUint64(hdr[:8], uint64(len(kr.GetKey())))
		d.Write(hdr[:8])
		d.Write(kr.GetKey())
		// The record's MarshalBinary, written in place: version, flags, timestamp, value.
		r := kr.GetRecord()
		switch {
		case r.GetTombstone() && len(r.GetValue()) != 0:
			// An invalid record (a tombstone with a value) still gets a checksum of its parts.
			d.Write([]byte{0xff})
		default:
			hdr[0], hdr[1] = 1, 0
			if r.GetTombstone() {
				hdr[1] = 1
			}
			binary.BigEndian.PutUint64(hdr[2:], r.GetTimestamp())
			d.Write(hdr[:])
		}
		d.Write(r.GetValue())
	}
	return d.Sum64()
}
