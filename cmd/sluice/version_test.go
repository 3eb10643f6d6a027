package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestPrintVersion(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "sluice", Version: "v0.3.1"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "4473e75c0ffee"},
			{Key: "vcs.time", Value: "2026-11-30T12:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	var b bytes.Buffer
	printVersion(&b, bi)
	want := "sluice v0.3.1\ncommit 4473e75c0ffee (2026-11-30T12:00:00Z) with local changes\ngo go1.26.8\n"
	if b.String() != want {
		t.Fatalf("printed %q, want %q", b.String(), want)
	}
}

// TestVersionStamped checks that release stamps replace the build
// information's version, revision and time, and that a stamped commit
// drops a "with local changes" the release tree cannot have.
func TestVersionStamped(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/sluicedb/sluice", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	var b bytes.Buffer
	printVersion(&b, stamped(bi, "v1.2.3", "0123abcd", "2026-12-01T10:00:00Z"))
	want := "sluice v1.2.3\ncommit 0123abcd (2026-12-01T10:00:00Z)\ngo go1.26.8\n"
	if b.String() != want {
		t.Fatalf("printed %q, want %q", b.String(), want)
	}
	b.Reset()
	printVersion(&b, stamped(bi, "", "", ""))
	if want := "sluice (devel)\ncommit unknown with local changes\ngo go1.26.8\n"; b.String() != want {
		t.Fatalf("unstamped printed %q, want %q", b.String(), want)
	}
}

// TestVersionOfBuiltBinary builds sluice and checks that `sluice version`
// prints the module version, commit and Go version that `go version -m`
// finds in the binary.
func TestVersionOfBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	meta, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	mod := regexp.MustCompile(`(?m)^\tmod\tgithub\.com/sluicedb/sluice\t(\S+)`).FindSubmatch(meta)
	if mod == nil {
		t.Fatalf("go version -m names no main module:\n%s", meta)
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) < 3 || lines[0] != "sluice "+string(mod[1]) || lines[2] != "go "+runtime.Version() {
		t.Fatalf("sluice version printed %q; want module version %s and %s", out, mod[1], runtime.Version())
	}
	if rev := regexp.MustCompile(`(?m)^\tbuild\tvcs\.revision=(\S+)`).FindSubmatch(meta); rev != nil {
		if !strings.HasPrefix(lines[1], "commit "+string(rev[1])) {
			t.Fatalf("sluice version printed %q; want commit %s", lines[1], rev[1])
		}
	} else if lines[1] != "commit unknown" {
		t.Fatalf("no VCS stamp in the binary, yet version printed %q", lines[1])
	}
}
