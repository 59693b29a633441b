package present

import (
	"strings"

	"ringkv/proto/kvpb"
)

// DiskFull is how kvctl and the console name a node whose data volume is below its reserve.
const DiskFull = "DISK FULL"

// DiskFullShort is DiskFull in the console's 7-wide state column.
const DiskFullShort = "FULL"

// DataDamaged is how kvctl and the console name a node that started with --recover on
// damaged data.
const DataDamaged = "DATA DAMAGED"

// Faults is the note of a node's faults in kvctl status: "DISK FULL: 3.9 MiB free of 16.0
// MiB, reserve 4.0 MiB (--min-free-disk)", "DATA DAMAGED: 12 ranges damaged, awaiting repair
// (…)", or both; "" when it has none.
func Faults(info *kvpb.NodeInfoResponse) string {
	var s string
	if r := info.GetDiskFull(); r != "" {
		s = DiskFull + ": " + strings.TrimPrefix(r, "disk full: ")
	}
	d, n := info.GetDataDamage(), info.GetDamagedRanges()
	if d == "" && n == 0 {
		return s
	}
	if s != "" {
		s += "; "
	}
	s += DataDamaged
	if n > 0 {
		s += ": " + kvpb.DamagedRanges(int(n))
	}
	if d != "" {
		s += " (" + d + ")"
	}
	return s
}

// DiskFullEvent is the console's event line when a node's disk fills up (reason is its
// NodeInfo.disk_full: "disk full: 3.9 MiB free of 16.0 MiB, reserve 4.0 MiB (--min-free-disk)")
// or has room again (reason "").
func DiskFullEvent(id, reason string) string {
	if reason != "" {
		return "node " + id + " " + DiskFull + ": " + strings.TrimPrefix(reason, "disk full: ") + "; writes refused"
	}
	return "node " + id + " has disk space again: writes resume"
}
