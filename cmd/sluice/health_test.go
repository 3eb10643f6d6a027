package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHealthCommand runs `sluice health` against a running serve's HTTP
// server (ready, live) and against a port nothing serves.
func TestHealthCommand(t *testing.T) {
	addr, httpAddr := freeAddr(t), freeAddr(t)
	cmd, stderr := startServeArgs(t, addr, []string{"SLUICE_HTTP=" + httpAddr}, "serve", "--data", t.TempDir(), "--listen", addr)
	defer stopServe(t, cmd, stderr)
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := sluiceCmd("health", "--http", httpAddr).CombinedOutput()
		if err == nil {
			if strings.TrimSpace(string(out)) != "ready" {
				t.Fatalf("sluice health printed %q, want ready", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice health never succeeded: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	live := sluiceCmd("health", "--live")
	live.Env = append(live.Env, "SLUICE_HTTP="+httpAddr) // the default comes from serve's variable
	if out, err := live.CombinedOutput(); err != nil {
		t.Fatalf("sluice health --live with SLUICE_HTTP: %v\n%s", err, out)
	}
	closed := freeAddr(t)
	out, err := sluiceCmd("health", "--http", closed).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "is sluice serve running with --http "+closed) {
		t.Fatalf("against a closed port: exit %d, output %q", code, out)
	}
}

// TestCheckHealthNotReady checks that a 503 from /readyz fails with the
// broker's reason.
func TestCheckHealthNotReady(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		http.Error(w, "disk space below the low watermark", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	var b bytes.Buffer
	err := checkHealth(context.Background(), &b, strings.TrimPrefix(srv.URL, "http://"), "/readyz", 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "503 Service Unavailable: disk space below the low watermark") {
		t.Fatalf("got %v", err)
	}
}

// exitCode is the exit code of a finished command's error (0 for nil).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
