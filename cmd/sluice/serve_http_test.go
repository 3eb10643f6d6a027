package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServeHTTP runs the README's commands: `sluice serve` with the
// console on, JSON logs, and curl of the health, metrics and API routes.
func TestServeHTTP(t *testing.T) {
	dir, addr, web := t.TempDir(), freeAddr(t), freeAddr(t)
	cmd, stderr := startServe(t, dir, addr, "SLUICE_HTTP="+web, "SLUICE_LOG_FORMAT=json")
	stopped := false
	defer func() {
		if !stopped {
			stopServe(t, cmd, stderr)
		}
	}()
	base := "http://" + web

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("web-test"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()

	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/healthz", 200, "ok"},
		{"/readyz", 200, "ready"},
		{"/metrics", 200, `sluice_topic_records_in_total{topic="web-test"} 3`},
		{"/metrics", 200, `sluice_build_info{goversion="go`},
		{"/metrics", 200, "go_goroutines"},
		{"/", 200, "<title>Sluice console</title>"},
		{"/static/vendor/uPlot.iife.min.js", 200, "uPlot"},
		{"/api/v1/topics", 200, `"name":"web-test"`},
		{"/api/v1/topics/web-test/partitions/0/records?limit=2", 200, `"offset":2`},
		{"/api/v1/topics/web-test/partitions/0/records?limit=two", 400, "want an integer"},
	} {
		code, body := httpGet(t, base+c.path)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %s = %d, want %d with %q:\n%.500s", c.path, code, c.code, c.want, body)
		}
	}
	resp, err := http.Post(base+"/api/v1/topics", "application/json", strings.NewReader(`{"name":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("create topic without --http-admin = %d, want 403", resp.StatusCode)
	}

	stopServe(t, cmd, stderr)
	stopped = true
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	sawURL := false
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("--log-format json wrote a line that is not JSON: %q", l)
		}
		if m["url"] == base+"/" {
			sawURL = true
		}
	}
	if !sawURL {
		t.Errorf("no log line gives the console's URL %s/:\n%s", base, stderr.String())
	}
}

// TestServeHTTPAddressInUse: an HTTP address that cannot be bound stops
// serve with a message that says how to pick another or turn it off.
func TestServeHTTPAddressInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cmd := sluiceCmd("serve")
	cmd.Env = append(cmd.Env, "SLUICE_DATA="+t.TempDir(), "SLUICE_LISTEN="+freeAddr(t), "SLUICE_HTTP="+busy.Addr().String(), "SLUICE_SCHEMA_REGISTRY=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "turn it off with --http ''") {
		t.Fatalf("serve with a busy HTTP address: %v\n%s", err, out)
	}
}
