package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/broker/brokertest"
)

// TestQuickStartAsInREADME checks that the README's franz-go quick
// start is this program, runs it against a fresh broker, and compares
// what it prints with the output the README shows.
func TestQuickStartAsInREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## Quick start with franz-go\n")
	_, block, ok2 := strings.Cut(after, "```go\n")
	code, rest, _ := strings.Cut(block, "```")
	_, shown, ok3 := strings.Cut(rest, "prints\n\n```\n")
	shown, _, _ = strings.Cut(shown, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README has no franz-go quick start with its output")
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if code != string(src) {
		t.Fatalf("the README's franz-go quick start differs from examples/quickstart/main.go")
	}
	b := brokertest.Fast(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", ".")
	cmd.Env = append(os.Environ(), "SLUICE_BROKERS="+b.Addr())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	if string(out) != shown {
		t.Fatalf("the quick start printed\n%s\nthe README shows\n%s", out, shown)
	}
}
