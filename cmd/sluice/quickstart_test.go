package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestREADMEQuickStartKcat runs the README's kcat quick start as
// written (this test binary standing in for the built ./sluice, free
// ports in place of 9092 and 9644 through serve's variables), checks
// that the consume prints what the README shows, and that the block's
// own kill stopped the broker.
func TestREADMEQuickStartKcat(t *testing.T) {
	needTool(t, "kcat", "kcat")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## Quick start with kcat\n")
	_, block, ok2 := strings.Cut(after, "```sh\n")
	script, rest, _ := strings.Cut(block, "```")
	_, shown, ok3 := strings.Cut(rest, "The consume prints\n\n```\n")
	shown, _, _ = strings.Cut(shown, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README has no kcat quick start block with its output")
	}
	const build = "go build -o sluice ./cmd/sluice\n"
	if !strings.HasPrefix(script, build) {
		t.Fatalf("the quick start does not start by building the binary:\n%s", script)
	}
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sluice"), []byte("#!/bin/sh\nSLUICE_TEST_MAIN=1 exec '"+self+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	addr, httpAddr := freeAddr(t), freeAddr(t)
	script = strings.ReplaceAll(strings.TrimPrefix(script, build), "127.0.0.1:9092", addr)
	full := "set -euo pipefail\ntrap 'j=$(jobs -p); [ -z \"$j\" ] || kill $j 2>/dev/null; wait' EXIT\n" + script
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", full)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SLUICE_LISTEN="+addr, "SLUICE_HTTP="+httpAddr, "SLUICE_SCHEMA_REGISTRY=")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("README quick start: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), stderr.String())
	}
	if !strings.HasSuffix(out.String(), shown) {
		t.Fatalf("the quick start printed\n%s\nthe README shows\n%s", out.String(), shown)
	}
	if !strings.Contains(stderr.String(), "stopped cleanly") {
		t.Fatalf("the block's kill did not stop the broker gracefully:\n%s", stderr.String())
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("a broker still listens on %s after the quick start", addr)
	}
}
