package packaging

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestContainerImage builds the image with container/build.sh from the
// snapshot's linux binary (no registry involved: the base is scratch),
// runs it with podman on the host network, produces and consumes a
// record with kcat, and checks the image's health check and its non-root
// user. It skips, saying why, without podman, kcat or a linux host.
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
	tag := fmt.Sprintf("localhost/sluice-test:%d", time.Now().UnixNano())
	run(t, root, nil, filepath.Join(root, "packaging", "container", "build.sh"), bins[0], tag)
	t.Cleanup(func() { exec.Command(podman, "rmi", "-f", tag).Run() })

	kafka, httpAddr := freePort(t), freePort(t)
	name := strings.NewReplacer(":", "-", "/", "-").Replace(tag)
	args := []string{"run", "-d", "--name", name, "--network", "host",
		// Debian's podman under a restricted parent cannot raise the
		// process limits it defaults to; ask for ones it can set.
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
		// No systemd to run health check timers here; the test runs
		// the check itself.
		"--health-interval", "disable",
		"-e", "SLUICE_LISTEN=" + kafka, "-e", "SLUICE_HTTP=" + httpAddr, "-e", "SLUICE_SCHEMA_REGISTRY="}
	if _, err := exec.LookPath("runc"); err == nil {
		args = append(args, "--runtime", "runc")
	}
	run(t, root, nil, podman, append(args, tag)...)
	t.Cleanup(func() { exec.Command(podman, "rm", "-f", "-v", "-t", "30", name).Run() })
	logs := func() string { out, _ := exec.Command(podman, "logs", name).CombinedOutput(); return string(out) }

	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := exec.Command(podman, "healthcheck", "run", name).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image's health check never passed: %v\n%s\nlogs:\n%s", err, out, logs())
		}
		time.Sleep(200 * time.Millisecond)
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
