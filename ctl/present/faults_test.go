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
		{&kvpb.NodeInfoResponse{DiskFull: "x"}, "DISK FULL"},
		{&kvpb.NodeInfoResponse{DataDamage: "MANIFEST missing", DamagedRanges: 12},
			"DATA DAMAGED: 12 ranges damaged, awaiting repair (MANIFEST missing)"},
		{&kvpb.NodeInfoResponse{DiskFull: "x", DataDamage: "no other replica"}, "DISK FULL; DATA DAMAGED (no other replica)"},
	} {
		if got := Faults(tc.info); got != tc.want {
			t.Errorf("Faults(%v): got %q, want %q", tc.info, got, tc.want)
		}
	}
}
