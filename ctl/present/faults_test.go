package present

import (
	"testing"

	"ringkv/proto/kvpb"
)

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		info *kvpb.NodeInfoResponse
		want string
	}{
		{&kvpb.NodeInfoResponse{}, ""},
		{&kvpb.NodeInfoResponse{DiskFull: "disk full: 1.0 MiB free of 16.0 MiB, reserve 4.0 MiB (--min-free-disk)"}, "DISK FULL: 1.0 MiB free of 16.0 MiB, reserve 4.0 MiB (--min-free-disk)"},
		{&kvpb.NodeInfoResponse{DataDamage: "MANIFEST missing", DamagedRanges: 12},
			"DATA DAMAGED: 12 ranges damaged, awaiting repair (MANIFEST missing)"},
		{&kvpb.NodeInfoResponse{DiskFull: "x", DataDamage: "no other replica"}, "DISK FULL: x; DATA DAMAGED (no other replica)"},
	} {
		if got := Faults(tc.info); got != tc.want {
			t.Errorf("Faults(%v): got %q, want %q", tc.info, got, tc.want)
		}
	}
}
