package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/broker"
)

// TestServeConfigPrecedence checks flags > environment > file > defaults,
// key by key.
func TestServeConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sluice.yaml")
	yaml := "# every key is a serve flag\nlisten: 127.0.0.1:7001\nfsync: interval\npartitions: 4\nauto-create: false\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_FSYNC", "never")    // env beats the file
	t.Setenv("SLUICE_PARTITIONS", "9")   // the flag beats env
	t.Setenv("SLUICE_HTTP", "")          // set but empty: still env
	t.Setenv("SLUICE_LOG_LEVEL", "warn") // env beats the default
	cmd := newServeCmd()
	fs := cmd.Flags()
	if err := fs.Parse([]string{"--config", file, "--partitions", "2"}); err != nil {
		t.Fatal(err)
	}
	if err := applyConfig(fs); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"data":        broker.DefaultDataDir, // default
		"listen":      "127.0.0.1:7001",      // file
		"fsync":       "never",               // env over file
		"partitions":  "2",                   // flag over env
		"auto-create": "false",               // file over default
		"log-level":   "warn",                // env over default
		"http":        "",
	}
	for name, v := range want {
		if got := fs.Lookup(name).Value.String(); got != v {
			t.Errorf("%s = %q, want %q", name, got, v)
		}
	}

	// SLUICE_CONFIG names the file when --config is not given.
	t.Setenv("SLUICE_CONFIG", file)
	cmd = newServeCmd()
	if err := applyConfig(cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("listen").Value.String(); got != "127.0.0.1:7001" {
		t.Errorf("with SLUICE_CONFIG, listen = %q", got)
	}
}

// TestServeConfigErrors checks that a bad file or value is refused with
// its source named.
func TestServeConfigErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ yaml, want string }{
		{"lisen: x\n", `line 1: unknown key "lisen" (known: advertise, advertised-listeners, allow-everyone-if-no-acl, authorization, auto-create, connections-max-idle, data, disk-low-watermark, fsync, group-consumer-assignors, group-consumer-heartbeat-interval, group-consumer-max-heartbeat-interval, group-consumer-max-session-timeout, group-consumer-max-size, group-consumer-migration-policy, group-consumer-min-heartbeat-interval, group-consumer-min-session-timeout, group-consumer-session-timeout, http, http-admin, listen, listeners, log-format, log-level, log-requests, partition-metrics, partitions, queued-max-request-bytes, quota-window-num, quota-window-size-seconds, request-read-timeout, sasl-mechanisms, schema-registry, share-auto-offset-reset, share-delivery-count-limit, share-heartbeat, share-isolation-level, share-lock-duration, share-max-record-locks, share-max-size, share-session-timeout, superusers, tls-cert, tls-client-ca, tls-key, transaction-max-timeout, wal)`},
		{"partitions: many\n", `line 1: partitions: "many": want an integer`},
		{"data: d\nfsync: sometimes\n", `line 2: fsync: "sometimes": want always, interval or never`},
		{"log-level: loud\n", `line 1: log-level: "loud": want debug, info, warn or error`},
		{"log-format: xml\n", `line 1: log-format: "xml": want text or json`},
		{"auto-create: [true]\n", "auto-create: want a single value"},
		{"- a\n", "want a mapping"},
		{"data: a\ndata: b\n", "data given twice"},
		{"config: other.yaml\n", `unknown key "config"`},
	}
	for i, c := range cases {
		file := filepath.Join(dir, strings.Repeat("x", i+1)+".yaml")
		if err := os.WriteFile(file, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		fs := newServeCmd().Flags()
		if err := fs.Parse([]string{"--config", file}); err != nil {
			t.Fatal(err)
		}
		err := applyConfig(fs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.yaml, err, c.want)
		}
	}
	fs := newServeCmd().Flags()
	if err := fs.Parse([]string{"--config", filepath.Join(dir, "missing.yaml")}); err != nil {
		t.Fatal(err)
	}
	if err := applyConfig(fs); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: error %v", err)
	}

	// A bad value from the environment or the command line names its source.
	t.Setenv("SLUICE_FSYNC", "sometimes")
	if err := applyConfig(newServeCmd().Flags()); err == nil || err.Error() != `SLUICE_FSYNC="sometimes": want always, interval or never` {
		t.Errorf("bad SLUICE_FSYNC: error %v", err)
	}
	err := newServeCmd().Flags().Parse([]string{"--log-level", "loud"})
	if err == nil || !strings.Contains(err.Error(), `"--log-level" flag: want debug, info, warn or error`) {
		t.Errorf("bad --log-level: error %v", err)
	}
}

// TestServeFromConfigFile runs `sluice serve --config FILE` with the data
// directory and listen address only in the file, and talks to it.
func TestServeFromConfigFile(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	file := filepath.Join(dir, "sluice.yaml")
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(file, []byte("data: "+data+"\nlisten: "+addr+"\nlog-level: debug\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, stderr := startServeArgs(t, addr, nil, "serve", "--config", file)
	defer stopServe(t, cmd, stderr)
	ok(t, "", "topic", "create", "fromfile", "-b", addr)
	if _, err := os.Stat(filepath.Join(data, "topics", "fromfile")); err != nil {
		t.Fatalf("topic not in the data directory the file named: %v", err)
	}
}
