package packaging

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestContainerImage runs docs/packaging.md's container commands
// (build.sh on the snapshot's linux binary, no registry involved since
// the base is scratch; podman run with published ports; kcat -L), then
// produces and consumes a record with kcat, and checks the image's
// health check, its non-root user, volume and ports, and a clean stop.
// It skips, saying why, without podman, kcat or a linux host.
func TestContainerImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("container images are built on linux")
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("no podman on PATH (Debian: apt-get install podman runc)")
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("no kcat on PATH (Debian: apt-get install kcat)")
	}
	dist := snapshot(t)
	bins, _ := filepath.Glob(filepath.Join(dist, "sluice_linux_"+runtime.GOARCH+"*", "sluice"))
	if len(bins) != 1 {
		t.Fatalf("snapshot holds %v for linux/%s, want one binary", bins, runtime.GOARCH)
	}
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "packaging.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "<!-- container-run -->\n```sh\n")
	block, _, ok2 := strings.Cut(block, "```\n<!-- /container-run -->")
	if !ok || !ok2 {
		t.Fatal("docs/packaging.md has no container-run block")
	}
	// The documented commands, on free ports and under names of this
	// test's own.
	id := fmt.Sprint(time.Now().UnixNano())
	tag, name, volume := "localhost/sluice-test:"+id, "sluice-test-"+id, "sluice-test-data-"+id
	kafka, httpAddr := freePort(t), freePort(t)
	// Debian's podman under a restricted parent cannot raise the process
	// limits it defaults to, and without systemd it cannot schedule
	// health checks: the flags the document gives for such a host.
	extra := "--ulimit nofile=4096:4096 --ulimit nproc=4096:4096 --health-interval disable"
	if _, err := exec.LookPath("runc"); err == nil {
		extra += " --runtime runc"
	}
	script := strings.NewReplacer(
		"dist/sluice_linux_amd64_v1/sluice", bins[0],
		"127.0.0.1:9092", kafka,
		"127.0.0.1:9644", httpAddr,
		"sluice:dev", tag,
		"--name sluice ", "--name "+name+" ",
		"healthcheck run sluice ", "healthcheck run "+name+" ",
		"sluice-data:", volume+":",
		"podman run -d ", "podman run -d "+extra+" ",
	).Replace(block)
	t.Cleanup(func() {
		exec.Command(podman, "rm", "-f", "-t", "30", name).Run()
		exec.Command(podman, "volume", "rm", "-f", volume).Run()
		exec.Command(podman, "rmi", "-f", tag).Run()
	})
	logs := func() string { out, _ := exec.Command(podman, "logs", name).CombinedOutput(); return string(out) }
	out := run(t, root, nil, "bash", "-euo", "pipefail", "-c", script)
	if !strings.Contains(out, "broker 0 at "+kafka) {
		t.Fatalf("kcat -L through the published port:\n%s\nlogs:\n%s", out, logs())
	}
	if hc, err := exec.Command(podman, "healthcheck", "run", name).CombinedOutput(); err != nil {
		t.Fatalf("the image's health check fails once the broker serves: %v\n%s\nlogs:\n%s", err, hc, logs())
	}
	produce := exec.Command(kcat, "-P", "-b", kafka, "-t", "image-test", "-K:")
	produce.Stdin = strings.NewReader("k1:from the image\n")
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce: %v\n%s\nlogs:\n%s", err, out, logs())
	}
	got := run(t, root, nil, kcat, "-C", "-b", kafka, "-t", "image-test", "-o", "beginning", "-e", "-q", "-f", "%k=%s\n")
	if strings.TrimSpace(got) != "k1=from the image" {
		t.Fatalf("kcat consumed %q, want k1=from the image", got)
	}
	inspect := run(t, root, nil, podman, "image", "inspect", "--format",
		"{{.Config.User}} {{range $k, $v := .Config.Volumes}}{{$k}}{{end}} {{range $k, $v := .Config.ExposedPorts}}{{$k}},{{end}} {{.Config.Healthcheck.Test}}", tag)
	for _, want := range []string{"65532:65532", "/var/lib/sluice", "9092/tcp", "9644/tcp", "/sluice health"} {
		if !strings.Contains(inspect, want) {
			t.Errorf("image config %q lacks %q", strings.TrimSpace(inspect), want)
		}
	}
	run(t, root, nil, podman, "stop", "-t", "60", name)
	if l := logs(); !strings.Contains(l, "stopped cleanly") {
		t.Errorf("the container did not stop cleanly:\n%s", l)
	}
}

// freePort returns a 127.0.0.1 address no one listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
