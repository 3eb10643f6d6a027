package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Helpers for clients that run as child processes (kafkajs under node,
// confluent-kafka-python): each test script prints JSON lines on stdout
// and its diagnostics on stderr.

// needTool skips the test when tool is unusable (why says what is
// missing and how to install it), or fails it under CI=true so that CI
// can never pass by skipping.
func needTool(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s and CI=true", why)
	}
	t.Skipf("%s; skipping", why)
}

// jsonLines decodes each non-empty line of out as a JSON object.
func jsonLines(t *testing.T, who string, out []byte) []map[string]any {
	t.Helper()
	var res []map[string]any
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: output line %q is not JSON: %v", who, l, err)
		}
		res = append(res, m)
	}
	return res
}

// runScript runs cmd to completion and returns its JSON output lines,
// failing the test with the script's stderr when it exits non-zero.
// stdin, when not nil, is fed to the script.
func runScript(t *testing.T, who string, timeout time.Duration, cmd *exec.Cmd, stdin io.Reader) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Env, c.Dir, c.Stdin = cmd.Env, cmd.Dir, stdin
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s\nstdout:\n%s", who, err, stderr.String(), out)
	}
	return jsonLines(t, who, out)
}

// script is a long-running child process whose JSON output lines arrive
// on a channel. The test owns it: closing its standard input asks it to
// stop, and wait reaps it; a cleanup kills it if the test ends first.
type script struct {
	who    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan map[string]any // fed by the reader goroutine; closed after the process is reaped
	stderr *lockedBuffer
	done   chan struct{} // closed once the process has been reaped, before lines closes
	err    error         // the process's exit error, set before done closes
}

// lockedBuffer collects a child's stderr while it runs.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startScript(t *testing.T, who string, cmd *exec.Cmd) *script {
	t.Helper()
	s := &script{who: who, cmd: cmd, lines: make(chan map[string]any, 1024), stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	var err error
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: start: %v", who, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"event": "bad-output", "line": sc.Text()}
			}
			s.lines <- m
		}
		// Drain what is left so the child never blocks on a full pipe,
		// then reap it (os/exec's rule: Wait after reading stdout).
		_, _ = io.Copy(io.Discard, stdout)
		s.err = cmd.Wait()
		close(s.done)
		close(s.lines)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Kill()
		}
		for range s.lines {
		}
	})
	return s
}

// next returns the next output line for which keep is true, failing the
// test if the script exits or ctx ends first.
func (s *script) next(t *testing.T, ctx context.Context, what string, keep func(map[string]any) bool) map[string]any {
	t.Helper()
	for {
		select {
		case m, ok := <-s.lines:
			if !ok {
				t.Fatalf("%s exited while the test waited for %s\nstderr:\n%s", s.who, what, s.stderr.String())
			}
			if m["event"] == "bad-output" {
				t.Fatalf("%s printed a non-JSON line %q", s.who, m["line"])
			}
			if keep(m) {
				return m
			}
		case <-ctx.Done():
			t.Fatalf("%s: timed out waiting for %s\nstderr:\n%s", s.who, what, s.stderr.String())
		}
	}
}

// stop closes the script's standard input and waits for it to exit,
// returning the lines it printed after the last one the test read.
func (s *script) stop(t *testing.T, ctx context.Context) []map[string]any {
	t.Helper()
	_ = s.stdin.Close()
	var rest []map[string]any
	for {
		select {
		case m, ok := <-s.lines:
			if !ok {
				if s.err != nil {
					t.Fatalf("%s: %v\nstderr:\n%s", s.who, s.err, s.stderr.String())
				}
				return rest
			}
			rest = append(rest, m)
		case <-ctx.Done():
			t.Fatalf("%s: did not stop after its input closed\nstderr:\n%s", s.who, s.stderr.String())
		}
	}
}

// missingAPIs returns the names of the APIs among keys that the broker at
// addr does not list in its ApiVersions response.
func missingAPIs(t *testing.T, addr string, keys ...int16) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	have := map[int16]bool{}
	for _, k := range resp.ApiKeys {
		have[k.ApiKey] = true
	}
	var missing []string
	for _, k := range keys {
		if !have[k] {
			missing = append(missing, fmt.Sprintf("%s (API key %d)", kmsg.NameForKey(k), k))
		}
	}
	return missing
}
