package packaging

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

var (
	snapshotOnce sync.Once
	snapshotDist string // the snapshot's dist directory, "" when it failed
	snapshotLog  string
	snapshotHead string // the commit the snapshot was built from
)

// snapshot runs `goreleaser check` and, once per test binary, `goreleaser
// release --snapshot --clean` into a shared directory, and returns that
// dist directory. Tests that need a release binary (the container image)
// take it from here, so a CI run builds the six targets once.
func snapshot(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the snapshot builds sluice for six targets")
	}
	gr := tool(t, "goreleaser", goreleaserPkg, goreleaserVer)
	snapshotOnce.Do(func() {
		root := repoRoot(t)
		dist := filepath.Join(shared, "dist")
		head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
		if err != nil {
			snapshotLog = "git rev-parse HEAD: " + err.Error()
			return
		}
		snapshotHead = strings.TrimSpace(string(head))
		cfg, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
		if err != nil {
			snapshotLog = err.Error()
			return
		}
		// The same configuration, writing into the shared directory
		// instead of the checkout's dist/.
		conf := filepath.Join(shared, "goreleaser.yaml")
		if err := os.WriteFile(conf, append([]byte("dist: "+dist+"\n"), cfg...), 0o644); err != nil {
			snapshotLog = err.Error()
			return
		}
		cmd := exec.Command(gr, "release", "--snapshot", "--clean", "--config", conf)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), gitRemoteEnv(t, root)...)
		out, err := cmd.CombinedOutput()
		snapshotLog = string(out)
		if err == nil {
			snapshotDist = dist
		}
	})
	if snapshotDist == "" {
		t.Fatalf("goreleaser release --snapshot failed:\n%s", snapshotLog)
	}
	return snapshotDist
}

// gitRemoteEnv names the project's repository as remote "origin" through
// git's environment when the checkout has no remote (a CI checkout from a
// bundle, say): without one goreleaser drops all git information and
// stamps "none" as the commit.
func gitRemoteEnv(t *testing.T, root string) []string {
	out, err := exec.Command("git", "-C", root, "remote").Output()
	if err == nil && strings.TrimSpace(string(out)) != "" {
		return nil
	}
	return []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=remote.origin.url", "GIT_CONFIG_VALUE_0=https://github.com/sluicedb/sluice.git"}
}

// TestGoReleaserCheck validates .goreleaser.yaml.
func TestGoReleaserCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs goreleaser")
	}
	gr := tool(t, "goreleaser", goreleaserPkg, goreleaserVer)
	root := repoRoot(t)
	out := run(t, root, gitRemoteEnv(t, root), gr, "check")
	if !strings.Contains(out, "1 configuration file(s) validated") {
		t.Fatalf("goreleaser check:\n%s", out)
	}
}

// TestGoReleaserSnapshot checks the snapshot build: six archives (zip
// for windows), a checksums file that matches them, and a linux binary
// whose `sluice version` carries the version, the full commit and its
// date instead of "(devel)" and "unknown".
func TestGoReleaserSnapshot(t *testing.T) {
	dist := snapshot(t)
	root := repoRoot(t)
	head := snapshotHead
	sums := map[string]string{}
	b, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q", line)
		}
		sums[name] = sum
	}
	var version string
	for _, name := range sortedKeys(sums) {
		if v, ok := strings.CutPrefix(name, "sluice_"); ok && strings.HasSuffix(v, "_linux_amd64.tar.gz") {
			version = strings.TrimSuffix(v, "_linux_amd64.tar.gz")
		}
	}
	if version == "" || !strings.HasSuffix(version, "+"+head[:7]) {
		t.Fatalf("no linux amd64 archive with the snapshot version of %s among %v", head[:7], sortedKeys(sums))
	}
	var archives []string
	for _, goos := range []string{"linux", "darwin", "windows"} {
		for _, arch := range []string{"amd64", "arm64"} {
			ext := ".tar.gz"
			if goos == "windows" {
				ext = ".zip"
			}
			archives = append(archives, "sluice_"+version+"_"+goos+"_"+arch+ext)
		}
	}
	if len(sums) != len(archives) {
		t.Errorf("checksums.txt lists %d files, want the %d archives: %v", len(sums), len(archives), sortedKeys(sums))
	}
	for _, a := range archives {
		data, err := os.ReadFile(filepath.Join(dist, a))
		if err != nil {
			t.Errorf("archive %s: %v", a, err)
			continue
		}
		got := sha256.Sum256(data)
		if sums[a] != hex.EncodeToString(got[:]) {
			t.Errorf("%s: checksums.txt says %q, the file's SHA-256 is %x", a, sums[a], got)
		}
	}

	bin := extract(t, filepath.Join(dist, "sluice_"+version+"_linux_amd64.tar.gz"), "sluice")
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the linux amd64 binary does not run on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	out := run(t, root, nil, bin, "version")
	date := strings.TrimSpace(run(t, root, nil, "git", "show", "-s", "--format=%cI", head))
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || lines[0] != "sluice "+version || !strings.HasPrefix(lines[1], "commit "+head+" (") ||
		!strings.HasPrefix(lines[2], "go go1.") {
		t.Fatalf("sluice version of the release binary:\n%s\nwant version %s, commit %s (%s)", out, version, head, date)
	}
	if strings.Contains(out, "none") || strings.Contains(out, "unknown") || strings.Contains(out, "local changes") {
		t.Fatalf("sluice version of the release binary is not fully stamped:\n%s", out)
	}
}

// extract writes the file name of a .tar.gz archive to a temporary
// directory and returns its path.
func extract(t *testing.T, archive, name string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s holds no %s", archive, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != name {
			continue
		}
		out := filepath.Join(t.TempDir(), name)
		w, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, tr); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return out
	}
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
