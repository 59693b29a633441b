package store

import (
	"errors"

	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

var (
	// ErrInvalidConfig is returned by Config.Validate and Open for a bad Config.
	ErrInvalidConfig = errors.New("invalid store config")
	// ErrShortRecord is returned when decoding a record shorter than its header.
	ErrShortRecord = errors.New("record too short")
	// ErrUnknownVersion is returned when decoding a record of an unknown codec version.
	ErrUnknownVersion = errors.New("unknown record version")
	// ErrInvalidRecord is returned for a record with unknown flags or a tombstone
	// carrying a value, when encoding or decoding.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrAfterOutOfRange is returned by Scan when the resume key lies outside the range.
	ErrAfterOutOfRange = errors.New("scan resume key outside range")
	// ErrDiskFull is returned by Apply and ApplyBatch while the data volume's free space is
	// below Config.MinFreeDisk: the write is refused before badger sees it. HTTP 507, gRPC
	// ResourceExhausted. Writes resume by themselves once space is freed.
	ErrDiskFull = rpcerr.New(kvpb.Reason_REASON_DISK_FULL, "disk full")
	// ErrVolumeTooSmall is returned by Open for a data volume smaller than MinVolume.
	ErrVolumeTooSmall = errors.New("data volume too small")
	// ErrDamaged is returned by Open for a store whose files are damaged (a checksum
	// mismatch, a malformed or missing file, fewer keys than the store held); with
	// Config.Recover it opens what is left instead (Store.Damage).
	ErrDamaged = errors.New("data damaged")
	// ErrClosed is returned by operations on a closed Store.
	ErrClosed = rpcerr.New(kvpb.Reason_REASON_STORE_CLOSED, "store closed")
)
