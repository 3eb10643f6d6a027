package schemaregistry

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicedb/sluice/broker"
)

// doAs sends a request with HTTP Basic credentials (none when user is "").
func (e *env) doAs(t *testing.T, user, password, method, path, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, strings.TrimSpace(b.String()), resp.Header
}

// TestLoginAndACLs: with a SASL listener every request needs HTTP Basic
// with a broker user; with authorization on, the subject ACLs
// (TOPIC "subject:NAME", literal or prefixed) and the cluster ACLs for
// the global config decide.
func TestLoginAndACLs(t *testing.T) {
	e := newEnv(t,
		broker.Listeners(broker.Listener{Protocol: broker.SASLPlaintext, Addr: "127.0.0.1:0"}),
		broker.Authorization(true), broker.SuperUsers("admin"), broker.BootstrapUser("admin", "admin-secret"))
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.b.Addr()), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"}}); err != nil {
		t.Fatal(err)
	}
	acls := kadm.NewACLs().Topics(SubjectACLPrefix+"orders-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribeConfigs)
	res, err := adm.CreateACLs(ctx, acls)
	if err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}

	st, body, h := e.doAs(t, "", "", "GET", "/subjects", "")
	if st != 401 || !sameCode(body, 40101) || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("no login: %d %s %v", st, body, h)
	}
	if st, body, _ := e.doAs(t, "alice", "wrong", "GET", "/subjects", ""); st != 401 || !sameCode(body, 40101) {
		t.Fatalf("wrong password: %d %s", st, body)
	}
	for _, s := range []string{"orders-value", "payments-value"} {
		if st, body, _ := e.doAs(t, "admin", "admin-secret", "POST", "/subjects/"+s+"/versions", schemaBody("", avroV1)); st != 200 {
			t.Fatalf("admin registers %s: %d %s", s, st, body)
		}
	}
	check := func(method, path, body string, status, code int) {
		t.Helper()
		st, got, _ := e.doAs(t, "alice", "alice-secret", method, path, body)
		if st != status || (code != 0 && !sameCode(got, code)) {
			t.Fatalf("alice %s %s: %d %s, want %d %d", method, path, st, got, status, code)
		}
	}
	check("GET", "/subjects", "", 200, 0)
	if _, got, _ := e.doAs(t, "alice", "alice-secret", "GET", "/subjects", ""); got != `["orders-value"]` {
		t.Fatalf("alice lists %s, want only orders-value", got)
	}
	check("GET", "/subjects/orders-value/versions/1", "", 200, 0)
	check("GET", "/subjects/payments-value/versions/1", "", 403, 40301)
	check("GET", "/subjects/unknown/versions/1", "", 403, 40301) // refused before the existence check
	check("POST", "/subjects/orders-value/versions", schemaBody("", avroV2), 200, 0)
	check("POST", "/subjects/payments-value/versions", schemaBody("", avroV2), 403, 40301)
	check("DELETE", "/subjects/orders-value/versions/2", "", 403, 40301) // no DELETE ACL
	check("GET", "/config/orders-value?defaultToGlobal=true", "", 200, 0)
	check("PUT", "/config/orders-value", `{"compatibility":"NONE"}`, 403, 40301) // no ALTER_CONFIGS
	check("GET", "/config", "", 403, 40301)                                      // the cluster
	check("GET", "/schemas/ids/1", "", 200, 0)                                   // used by orders-value
	check("GET", "/schemas/ids/1/subjects", "", 200, 0)
	if _, got, _ := e.doAs(t, "alice", "alice-secret", "GET", "/schemas/ids/1/subjects", ""); got != `["orders-value"]` {
		t.Fatalf("alice sees subjects %s of id 1", got)
	}
	// The superuser may do anything.
	if st, body, _ := e.doAs(t, "admin", "admin-secret", "PUT", "/config", `{"compatibility":"FULL"}`); st != 200 {
		t.Fatalf("admin PUT /config: %d %s", st, body)
	}
}
