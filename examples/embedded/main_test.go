package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestOutputAsInREADME runs the example and checks that it prints what
// the README's "Embedding" section shows.
func TestOutputAsInREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- example-embedded-output -->\n```\n")
	want, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no example-embedded-output block")
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, &out, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Fatalf("the example printed\n%s\nthe README shows\n%s", out.String(), want)
	}
}
