package main

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestHelpGolden")

// commandPaths lists the argument paths of every visible command under cmd.
func commandPaths(cmd *cobra.Command, prefix []string) [][]string {
	paths := [][]string{prefix}
	for _, c := range cmd.Commands() {
		if c.Hidden {
			continue
		}
		paths = append(paths, commandPaths(c, append(append([]string{}, prefix...), c.Name()))...)
	}
	return paths
}

// TestHelpGolden checks `sluice <cmd> --help` for every command against
// testdata/help, so help text changes are deliberate: run
// go test ./cmd/sluice -run TestHelpGolden -update to accept new text.
func TestHelpGolden(t *testing.T) {
	root := newRootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	dir := filepath.Join("testdata", "help")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, path := range commandPaths(root, nil) {
		name := strings.Join(append([]string{"sluice"}, path...), "_") + ".golden"
		seen[name] = true
		r := ok(t, "", append(path, "--help")...)
		file := filepath.Join(dir, name)
		if *update {
			if err := os.WriteFile(file, []byte(r.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("sluice %s --help: %v (run with -update to create it)", strings.Join(path, " "), err)
			continue
		}
		if r.stdout != string(want) {
			t.Errorf("sluice %s --help changed (run with -update if deliberate):\n--- got\n%s\n--- want\n%s", strings.Join(path, " "), r.stdout, want)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.golden"))
	sort.Strings(files)
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			if *update {
				os.Remove(f)
				continue
			}
			t.Errorf("%s belongs to no command; run with -update to remove it", f)
		}
	}
}
