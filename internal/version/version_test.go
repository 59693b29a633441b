package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	tests := []struct {
		name      string
		bi        debug.BuildInfo
		wantShort string
		wantLong  string
	}{
		{
			name:      "work tree, stamped",
			bi:        debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b9c0d"}, {Key: "vcs.time", Value: "2026-11-23T22:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			wantShort: "devel+1a2b3c4d5e6f-dirty",
			wantLong:  "devel (rev 1a2b3c4d5e6f with local changes, 2026-11-23T22:00:00Z, go1.26.0)",
		},
		{
			name:      "tagged module",
			bi:        debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}},
			wantShort: "v1.2.3",
			wantLong:  "v1.2.3 (go1.26.0)",
		},
	}
	for _, tt := range tests {
		in := fromBuildInfo(&tt.bi)
		if got := in.Short(); got != tt.wantShort {
			t.Errorf("%s: got short %q, want %q", tt.name, got, tt.wantShort)
		}
		if got := in.String(); got != tt.wantLong {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.wantLong)
		}
	}
}
