package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeChecksPortsFirst holds the Kafka, HTTP or schema registry
// port and checks that serve exits naming the flag and a way out,
// before it logs "listening" or creates the data directory.
func TestServeChecksPortsFirst(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	busy := held.Addr().String()
	cases := []struct {
		name string
		env  []string
		want string
	}{
		{"kafka", []string{"SLUICE_LISTEN=" + busy}, "--listen " + busy + ": the address is already in use: stop the other broker"},
		{"listeners", []string{"SLUICE_LISTENERS=PLAINTEXT://" + busy}, "--listeners PLAINTEXT " + busy + ": the address is already in use"},
		{"http", []string{"SLUICE_HTTP=" + busy}, "--http " + busy + ": the address is already in use: choose another with --http, or turn it off with --http ''"},
		{"schema", []string{"SLUICE_SCHEMA_REGISTRY=" + busy}, "--schema-registry " + busy + ": the address is already in use"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			cmd := sluiceCmd("serve")
			cmd.Env = append(cmd.Env, "SLUICE_DATA="+data, "SLUICE_LISTEN="+freeAddr(t), "SLUICE_HTTP=", "SLUICE_SCHEMA_REGISTRY=")
			cmd.Env = append(cmd.Env, c.env...)
			done := make(chan struct{})
			timer := time.AfterFunc(time.Minute, func() {
				select {
				case <-done:
				default:
					cmd.Process.Kill() // a serve that did not notice the busy port
				}
			})
			defer timer.Stop()
			out, err := cmd.CombinedOutput()
			close(done)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exited with %v, want exit code 1:\n%s", err, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("output does not say %q:\n%s", c.want, out)
			}
			if strings.Contains(string(out), "listening") {
				t.Errorf("serve logged that it listens before failing:\n%s", out)
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("serve created its data directory before failing (stat: %v)", err)
			}
		})
	}
}
