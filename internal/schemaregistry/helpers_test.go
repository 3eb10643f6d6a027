package schemaregistry

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a broker with a registry served by httptest.
type env struct {
	b   *broker.Broker
	reg *Registry
	srv *httptest.Server
}

func newEnv(t *testing.T, opts ...broker.Opt) *env {
	t.Helper()
	b := brokertest.Start(t, opts...)
	return openEnv(t, b)
}

// openEnv opens a registry on b, closed when the test ends.
func openEnv(t *testing.T, b *broker.Broker) *env {
	t.Helper()
	reg, err := New(context.Background(), Config{Broker: b})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(reg.Handler())
	e := &env{b: b, reg: reg, srv: srv}
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	e.srv.Close()
	e.reg.Close()
}

// do sends a request and returns the status and body.
func (e *env) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// want sends a request and fails unless the answer has status and
// body (compared as JSON when it parses as JSON).
func (e *env) want(t *testing.T, method, path, body string, status int, want string) {
	t.Helper()
	got, gotBody := e.do(t, method, path, body)
	if got != status || !sameJSON(gotBody, want) {
		t.Fatalf("%s %s %s:\n got %d %s\nwant %d %s", method, path, body, got, gotBody, status, want)
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return compactJSON(mustJSON(x), true) == compactJSON(mustJSON(y), true)
}

// schemaBody is a register/lookup body for schema text s of type typ.
func schemaBody(typ, s string, refs ...Reference) string {
	m := map[string]any{"schema": s}
	if typ != "" {
		m["schemaType"] = typ
	}
	if len(refs) > 0 {
		m["references"] = refs
	}
	return mustJSON(m)
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
