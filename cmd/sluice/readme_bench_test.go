package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestREADMEBenchBlock runs the README's bench commands in order, as
// written but with smaller counts, against a `sluice serve` whose
// process id is $SLUICE_PID as in the quick start.
func TestREADMEBenchBlock(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four bench runs")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## Benchmarks\n")
	_, block, ok2 := strings.Cut(after, "```sh\n")
	script, _, _ := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README has no Benchmarks sh block")
	}
	// The block starts and stops its own broker; this test brings one.
	var bench []string
	for _, l := range strings.SplitAfter(script, "\n") {
		if strings.HasPrefix(l, "./sluice bench ") {
			bench = append(bench, l)
		}
	}
	script = strings.NewReplacer("--records 1000000", "--records 2000", "--duration 10s", "--duration 300ms", "--callers 64", "--callers 4").Replace(strings.Join(bench, ""))
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sluice"), []byte("#!/bin/sh\nSLUICE_TEST_MAIN=1 exec '"+self+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	serve, stderr := startServe(t, t.TempDir(), addr)
	defer stopServe(t, serve, stderr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SLUICE_BROKERS="+addr, fmt.Sprintf("SLUICE_PID=%d", serve.Process.Pid))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("README bench commands: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "broker: cpu ") {
		t.Fatalf("the --broker-pid run reported no broker CPU:\n%s", out.String())
	}
}
