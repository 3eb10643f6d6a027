package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicedb/sluice/broker"
)

// docBlock returns the shell block between <!-- name --> and
// <!-- /name --> in a file of the repository's docs.
func docBlock(t *testing.T, file, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", file))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- "+name+" -->")
	block, _, ok2 := strings.Cut(rest, "<!-- /"+name+" -->")
	if !ok || !ok2 {
		t.Fatalf("%s: no %s block", file, name)
	}
	block = strings.TrimSpace(block)
	block = strings.TrimPrefix(block, "```sh")
	return strings.TrimSuffix(block, "```")
}

// runDocCommands runs a documented shell block against n, with the
// sluice binary built from this tree in place of `go run ./cmd/sluice`.
func runDocCommands(t *testing.T, n *node, block string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.CommandContext(ctxT(t, 5*time.Minute), "go", "-C", "..", "build", "-o", bin, "./cmd/sluice")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sluice: %v\n%s", err, out)
	}
	script := strings.ReplaceAll(block, "go run ./cmd/sluice", bin)
	script = strings.ReplaceAll(script, "127.0.0.1:9092", n.addr)
	cmd := exec.CommandContext(ctxT(t, time.Minute), "bash", "-euo", "pipefail", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("documented commands failed: %v\n%s\nscript:\n%s", err, out, script)
	}
	return string(out)
}

// TestAdminDocCommands runs the commands of docs/admin.md.
func TestAdminDocCommands(t *testing.T) {
	needKcat(t)
	n := startNode(t)
	out := runDocCommands(t, n, docBlock(t, "docs/admin.md", "admin-doc-commands"))
	for _, want := range []string{"created settings", "0 color=red", "1 size=10", "2 color=blue", "3 size=12",
		"min.cleanable.dirty.ratio", "0.1", "DYNAMIC_TOPIC_CONFIG"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if got := describedTopicConfig(t, n.addr, "settings", "cleanup.policy"); got != "compact" {
		t.Errorf("cleanup.policy %q", got)
	}
}

// TestTelemetryDocCommands runs the client telemetry commands of
// docs/observability.md: the benchmark's franz-go producer matches the
// subscription and its pushed metrics are exported.
func TestTelemetryDocCommands(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := startNode(t, broker.Registerer(reg))
	out := runDocCommands(t, n, docBlock(t, "docs/observability.md", "telemetry-doc-commands"))
	if !strings.Contains(out, "subscription producers set") || !strings.Contains(out, "org.apache.kafka.producer.") {
		t.Fatalf("output lacks the subscription:\n%s", out)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var metrics []string
	for _, mf := range mfs {
		if mf.GetName() != "sluice_client_telemetry_value" {
			continue
		}
		for _, m := range mf.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["client_software_name"] != "kgo" || l["client_instance_id"] == "" || !strings.HasPrefix(l["metric"], "org.apache.kafka.producer.") {
				t.Errorf("exported %v", l)
			}
			metrics = append(metrics, l["metric"])
		}
	}
	if len(metrics) == 0 {
		t.Fatalf("no pushed metric exported after the benchmark:\n%s", out)
	}
}
