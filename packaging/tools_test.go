package packaging

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-packaging-")
	if err != nil {
		panic(err)
	}
	shared = dir
	goleak.VerifyTestMain(cleanup{m, dir})
}

// cleanup removes the shared directory once the tests have run.
type cleanup struct {
	m   *testing.M
	dir string
}

func (c cleanup) Run() int {
	code := c.m.Run()
	os.RemoveAll(c.dir)
	return code
}

// shared is a directory for what several tests use (the snapshot build).
var shared string

// The pinned versions of the Go programs these tests run. .ci/run builds
// the same ones into the same cache before the tests start.
const (
	goreleaserPkg = "github.com/goreleaser/goreleaser/v2"
	goreleaserVer = "v2.15.1"
	helmPkg       = "helm.sh/helm/v3/cmd/helm"
	helmVer       = "v3.22.0"
)

// toolCache is where pinned tools are built once and reused by later
// runs: $SLUICE_TOOL_CACHE, else sluice-ci in the user cache directory.
func toolCache(t *testing.T) string {
	if d := os.Getenv("SLUICE_TOOL_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory for the pinned tools: %v (set SLUICE_TOOL_CACHE)", err)
	}
	return filepath.Join(d, "sluice-ci")
}

var toolMu sync.Mutex // one go install at a time

// tool returns the path of binary name of pkg at version, built with go
// install into the tool cache when it is not there yet (minutes from a
// cold module cache).
func tool(t *testing.T, name, pkg, version string) string {
	t.Helper()
	toolMu.Lock()
	defer toolMu.Unlock()
	dir := filepath.Join(toolCache(t), name+"-"+version)
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if testing.Short() {
		t.Skipf("%s %s is not built in %s and -short skips building it", name, version, dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", pkg+"@"+version)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s@%s: %v\n%s", pkg, version, err, out)
	}
	return bin
}

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// run runs a command in dir and returns its combined output, failing the
// test when it exits non-zero.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}
