package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnit checks systemd/sluice.service with systemd-analyze:
// verify (with ExecStart pointing at a sluice built from this tree,
// since verify checks that the binary exists) and an offline security
// review whose exposure must stay at 2.0 or below ("OK"). It skips
// without systemd-analyze (Debian package systemd).
func TestSystemdUnit(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze on PATH (Debian: apt-get install systemd)")
	}
	unit, err := os.ReadFile(filepath.Join("systemd", "sluice.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nType=notify\n", "\nDynamicUser=yes\n", "\nStateDirectory=sluice\n",
		"\nLimitNOFILE=", "\nRestart=on-failure\n", "ExecStart=/usr/local/bin/sluice serve --data /var/lib/sluice\n"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("sluice.service lacks %q", strings.TrimSpace(want))
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice")
	run(t, repoRoot(t), nil, "go", "build", "-o", bin, "./cmd/sluice")
	file := filepath.Join(dir, "sluice.service")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/sluice", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sa, "verify", file)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(sa, "security", "--offline=true", "--threshold=20", file).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security rates the unit above 2.0 (or failed): %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Overall exposure level for sluice.service") {
		t.Fatalf("systemd-analyze security printed no exposure level:\n%s", out)
	}
}
