package present

import "ringkv/proto/kvpb"

// DiskFull is how kvctl and the console name a node whose data volume is below its reserve.
const DiskFull = "DISK FULL"

// DiskFullShort is DiskFull in the console's 7-wide state column.
const DiskFullShort = "FULL"

// DataDamaged is how kvctl and the console name a node that started with --recover on
// damaged data.
const DataDamaged = "DATA DAMAGED"

// Faults is the note of a node's faults in kvctl status: "DISK FULL", "DATA DAMAGED (…)",
// or both; "" when it has none.
func Faults(info *kvpb.NodeInfoResponse) string {
	var s string
	if info.GetDiskFull() != "" {
		s = DiskFull
	}
	if d := info.GetDataDamage(); d != "" {
		if s != "" {
			s += "; "
		}
		s += DataDamaged + " (" + d + ")"
	}
	return s
}

// DiskFullEvent is the console's event line when a node's disk fills up or has room again.
func DiskFullEvent(id string, full bool) string {
	if full {
		return "node " + id + " " + DiskFull + ": writes refused"
	}
	return "node " + id + " has disk space again: writes resume"
}
