// Package version holds the build's version, set with -ldflags -X.
package version

import "runtime/debug"

// Version is set by the Makefile; otherwise the module's build info is used.
var Version = ""

// String returns the version and the Go toolchain that built it.
func String() string {
	v := Version
	bi, ok := debug.ReadBuildInfo()
	if v == "" && ok {
		v = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	gv := ""
	if ok {
		gv = " " + bi.GoVersion
	}
	return "edgelb " + v + gv
}
