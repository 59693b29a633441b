// Package version says which build of ringkv is running, from the module version and the
// VCS stamp Go writes into the binary (debug.ReadBuildInfo): kvctl version, kvnode
// --version and the version every node reports in its NodeInfo come from here.
package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Info is a build's identity.
type Info struct {
	// Module is the main module's version: "v1.2.3", or "devel" for a build from a work tree.
	Module string
	// Revision is the VCS revision, shortened to 12 digits; "" when not stamped (go run,
	// go test, -buildvcs=false). Modified tells whether the work tree had changes.
	Revision string
	Modified bool
	// Time is the revision's commit time (RFC 3339), "" when not stamped.
	Time string
	// Go is the toolchain's version.
	Go string
}

// Get reads the running binary's build info.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Module: "devel", Go: "unknown"}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Module: bi.Main.Version, Go: bi.GoVersion}
	if in.Module == "" || in.Module == "(devel)" {
		in.Module = "devel"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
			if len(in.Revision) > 12 {
				in.Revision = in.Revision[:12]
			}
		case "vcs.modified":
			in.Modified = s.Value == "true"
		case "vcs.time":
			in.Time = s.Value
		}
	}
	return in
}

// Short is the version in one word: "v1.2.3", "devel+1a2b3c4d5e6f", "devel+1a2b3c4d5e6f-dirty".
func (in Info) Short() string {
	s := in.Module
	if in.Revision != "" {
		s += "+" + in.Revision
		if in.Modified {
			s += "-dirty"
		}
	}
	return s
}

// String is the version on one line: "v1.2.3 (rev 1a2b3c4d5e6f, 2026-11-23T22:00:00Z, go1.26.0)".
func (in Info) String() string {
	var parts []string
	if in.Revision != "" {
		rev := "rev " + in.Revision
		if in.Modified {
			rev += " with local changes"
		}
		parts = append(parts, rev)
	}
	if in.Time != "" {
		parts = append(parts, in.Time)
	}
	parts = append(parts, in.Go)
	return fmt.Sprintf("%s (%s)", in.Module, strings.Join(parts, ", "))
}
