package broker

import (
	"runtime"
	"runtime/debug"
)

// version is Sluice's version when the build sets it:
//
//	go build -ldflags "-X github.com/sluicedb/sluice/broker.version=v0.3.0" ./cmd/sluice
var version string

// Version returns Sluice's version: the one set at build time, else the
// main module's version from the build info ("(devel)" for a build from
// a work tree), else "devel".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

// GoVersion is the Go release that built this binary.
func GoVersion() string { return runtime.Version() }
