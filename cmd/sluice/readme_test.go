package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sluicedb/sluice/broker/brokertest"
)

// fencedBlocks returns the bodies of the README's code blocks tagged lang.
func fencedBlocks(t *testing.T, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?ms)^```" + lang + "\n(.*?)^```$")
	var blocks []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatalf("README.md has no %s blocks", lang)
	}
	return blocks
}

// transcriptStep is one "$ command" of a console block and the output
// shown after it.
type transcriptStep struct {
	command, output string
}

func parseTranscript(block string) []transcriptStep {
	var steps []transcriptStep
	for _, line := range strings.SplitAfter(block, "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			steps = append(steps, transcriptStep{command: strings.TrimSuffix(cmd, "\n")})
			continue
		}
		if len(steps) > 0 {
			steps[len(steps)-1].output += line
		}
	}
	return steps
}

// TestREADMEExamples runs every console block of README.md with sh, a
// `sluice` on PATH (this test binary standing in for it) and
// SLUICE_BROKERS naming an embedded broker, and checks that each command
// prints what the README shows (stdout and stderr together). A command
// whose shown output has a "sluice: " line must exit 1, the others 0.
func TestREADMEExamples(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to run the README's commands")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	script := "#!/bin/sh\nSLUICE_TEST_MAIN=1 exec '" + self + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "sluice"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, block := range fencedBlocks(t, "console") {
		addr := brokertest.Start(t).Addr()
		for _, step := range parseTranscript(block) {
			cmd := exec.Command("sh", "-c", step.command)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "SLUICE_BROKERS="+addr)
			out, err := cmd.CombinedOutput()
			wantCode := 0
			if regexp.MustCompile(`(?m)^sluice: `).MatchString(step.output) {
				wantCode = 1
			}
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("block %d: %s: %v", i, step.command, err)
			}
			if code != wantCode || string(out) != step.output {
				t.Errorf("block %d: $ %s\nexit %d, printed:\n%s\nREADME shows (exit %d):\n%s", i, step.command, code, out, wantCode, step.output)
			}
		}
	}
}

// TestREADMEConfigFile loads each YAML block of README.md as a serve
// config file and checks that every key took effect.
func TestREADMEConfigFile(t *testing.T) {
	for i, block := range fencedBlocks(t, "yaml") {
		file := filepath.Join(t.TempDir(), "sluice.yaml")
		if err := os.WriteFile(file, []byte(block), 0o644); err != nil {
			t.Fatal(err)
		}
		fs := newServeCmd().Flags()
		if err := fs.Parse([]string{"--config", file}); err != nil {
			t.Fatal(err)
		}
		if err := applyConfig(fs); err != nil {
			t.Fatalf("README yaml block %d: %v", i, err)
		}
		kv := regexp.MustCompile(`(?m)^([a-z-]+): (\S+)$`).FindAllStringSubmatch(block, -1)
		if len(kv) == 0 {
			t.Fatalf("README yaml block %d sets nothing", i)
		}
		for _, m := range kv {
			if got := fs.Lookup(m[1]).Value.String(); got != m[2] {
				t.Errorf("README yaml block %d: %s = %q, want %q", i, m[1], got, m[2])
			}
		}
	}
}

// TestREADMEServeTable checks that README.md's serve table documents
// every serve flag with its environment variable and config key.
func TestREADMEServeTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\| `([A-Z_]+)` \\| `([a-z-]+)` \\|").FindAllStringSubmatch(string(b), -1)
	documented := map[string]bool{}
	for _, r := range rows {
		if r[2] != envName(r[1]) || r[3] != r[1] {
			t.Errorf("README row for --%s names env %s and key %s; want %s and %s", r[1], r[2], r[3], envName(r[1]), r[1])
		}
		documented[r[1]] = true
	}
	var missing []string
	newServeCmd().Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "config" && f.Name != "help" && !documented[f.Name] {
			missing = append(missing, f.Name)
		}
	})
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("README.md's serve table lacks --%s", strings.Join(missing, ", --"))
	}
}
