package console

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
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

// secureEnv is a broker whose only listener is SASL_SSL, with
// authorization on and the superuser admin/admin-secret, and a console
// (admin actions on) in front of it.
type secureEnv struct {
	b    *broker.Broker
	srv  *Server
	url  string
	cl   *kgo.Client  // admin over SASL_SSL
	adm  *kadm.Client // on cl
	logs *lockedBuffer
}

func newSecureEnv(t *testing.T) *secureEnv {
	t.Helper()
	certs := brokertest.NewCerts(t, "sluice-test-ca")
	reg := prometheus.NewRegistry()
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := brokertest.Secure(t, certs, broker.Listeners(broker.Listener{Protocol: broker.SASLSSL, Addr: "127.0.0.1:0"}),
		broker.Registerer(reg), broker.AutoCreateTopics(false), broker.Logger(logger))
	s, err := New(Config{Broker: b, Gatherer: reg, Admin: true, SampleEvery: 20 * time.Millisecond, History: 600, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Close() }) // before the broker's own cleanup
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.ListenerAddr(broker.SASLSSL)), kgo.DialTLSConfig(certs.ClientTLS(t, "")),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &secureEnv{b: b, srv: s, url: hs.URL, cl: cl, adm: kadm.NewClient(cl), logs: logs}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// setup makes user alice (password alice-pw) with READ and DESCRIBE on
// topic orders and DESCRIBE on group billing; topics orders and secret
// hold records, and groups billing and hidden have offsets on both.
func (e *secureEnv) setup(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t)
	res, err := e.adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	for _, topic := range []string{"orders", "secret"} {
		if r, err := e.adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, r.Err)
		}
		var recs []*kgo.Record
		for i := range 5 {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte{byte('a' + i)}, Value: []byte(topic + "-value")})
		}
		if err := e.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []string{"billing", "hidden"} {
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 2, LeaderEpoch: -1})
		offs.Add(kadm.Offset{Topic: "secret", Partition: 0, At: 1, LeaderEpoch: -1})
		if r, err := e.adm.CommitOffsets(ctx, g, offs); err != nil || r.Error() != nil {
			t.Fatalf("commit %s: %v %v", g, err, r.Error())
		}
	}
	acls := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).
		Operations(kadm.OpRead, kadm.OpDescribe)
	groupACL := kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("billing").ResourcePatternType(kadm.ACLPatternLiteral).
		Operations(kadm.OpDescribe)
	for _, a := range []*kadm.ACLBuilder{acls, groupACL} {
		if r, err := e.adm.CreateACLs(ctx, a); err != nil || r[0].Err != nil {
			t.Fatalf("CreateACLs: %v %v", err, r)
		}
	}
}

type reply struct {
	code   int
	header http.Header
	body   string
}

// do sends a request, with Basic credentials unless user is "".
func (e *secureEnv) do(t *testing.T, method, path, user, password, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// getAs fetches path as user, wants 200 and decodes into v.
func (e *secureEnv) getAs(t *testing.T, path, user, password string, v any) {
	t.Helper()
	r := e.do(t, "GET", path, user, password, "")
	if r.code != http.StatusOK {
		t.Fatalf("GET %s as %s: %d %s", path, user, r.code, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, r.body)
	}
}

// TestSecureConsoleLogin: with SASL on, every page and API route needs
// a SASL user's password (401 and a Basic challenge otherwise, after a
// delay that grows per address), probes and metrics stay open, and the
// password is never logged.
func TestSecureConsoleLogin(t *testing.T) {
	e := newSecureEnv(t)
	e.setup(t)
	for _, p := range []string{"/", "/static/app.js", "/api/v1/cluster", "/api/v1/topics", "/api/v1/topics/orders/partitions/0/records", "/api/v1/nothing"} {
		r := e.do(t, "GET", p, "", "", "")
		if r.code != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") != `Basic realm="Sluice"` || !strings.Contains(r.body, `"error"`) {
			t.Errorf("GET %s without credentials = %d %q %s", p, r.code, r.header.Get("WWW-Authenticate"), r.body)
		}
	}
	if r := e.do(t, "POST", "/api/v1/topics", "", "", `{"name":"x"}`); r.code != http.StatusUnauthorized {
		t.Errorf("POST without credentials = %d", r.code)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := e.do(t, "GET", p, "", "", ""); r.code != http.StatusOK {
			t.Errorf("GET %s without credentials = %d, want 200", p, r.code)
		}
	}
	// Wrong passwords and unknown users: 401, each failure counted for
	// the address with the broker's SASL failures (the next delay from
	// 127.0.0.1 is 8 times an untouched address's after three).
	for _, bad := range [][2]string{{"alice", "wrong-pw-1"}, {"admin", "wrong-pw-2"}, {"nobody", "alice-pw"}} {
		r := e.do(t, "GET", "/api/v1/cluster", bad[0], bad[1], "")
		if r.code != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") != `Basic realm="Sluice"` {
			t.Errorf("login %s/%s = %d %s", bad[0], bad[1], r.code, r.body)
		}
	}
	if fresh, here := e.b.LoginFailed("192.0.2.1"), e.b.LoginFailed("127.0.0.1"); here != 8*fresh {
		t.Errorf("the next failure from 127.0.0.1 waits %v, an untouched address %v: want 8 times (3 counted failures)", here, fresh)
	}
	for _, p := range []string{"/", "/static/app.js"} {
		if r := e.do(t, "GET", p, "alice", "alice-pw", ""); r.code != http.StatusOK {
			t.Errorf("GET %s as alice = %d", p, r.code)
		}
	}
	var ci clusterInfo
	e.getAs(t, "/api/v1/cluster", "alice", "alice-pw", &ci)
	if ci.User != "alice" || !ci.Authorization {
		t.Errorf("cluster as alice: user %q authorization %v", ci.User, ci.Authorization)
	}
	// A second request is served from the login cache; still alice.
	e.getAs(t, "/api/v1/cluster", "alice", "alice-pw", &ci)
	if ci.User != "alice" {
		t.Errorf("cached login: user %q", ci.User)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "console login failed") {
		t.Errorf("failed logins were not logged:\n%s", logs)
	}
	for _, pw := range []string{"wrong-pw-1", "wrong-pw-2", "alice-pw", "admin-secret"} {
		if strings.Contains(logs, pw) {
			t.Errorf("the logs hold password %q:\n%s", pw, logs)
		}
	}
}

// TestSecureConsoleACLs: a user sees and does only what its ACLs allow;
// the superuser sees and does everything. The broker's only listener is
// SASL_SSL: the console reads records through its in-process connection.
func TestSecureConsoleACLs(t *testing.T) {
	e := newSecureEnv(t)
	e.setup(t)
	const alice, apw, admin, spw = "alice", "alice-pw", "admin", "admin-secret"
	type topics struct {
		Topics []topicRow
		Total  int
	}
	names := func(ts topics) []string {
		var out []string
		for _, r := range ts.Topics {
			out = append(out, r.Name)
		}
		return out
	}

	var ts topics
	e.getAs(t, "/api/v1/topics", alice, apw, &ts)
	if ts.Total != 1 || !slices.Equal(names(ts), []string{"orders"}) {
		t.Fatalf("alice's topics = %+v", ts)
	}
	if ts.Topics[0].Records != 5 || ts.Topics[0].CleanupPolicy != "" || !ts.Topics[0].ConfigsHidden {
		t.Errorf("alice's orders row = %+v (configs need DESCRIBE_CONFIGS)", ts.Topics[0])
	}
	var one struct {
		Topic         broker.TopicInfo
		Records       int64
		ConfigsHidden bool `json:"configs_hidden"`
		CanDelete     bool `json:"can_delete"`
	}
	e.getAs(t, "/api/v1/topics/orders", alice, apw, &one)
	if one.Records != 5 || len(one.Topic.Configs) != 0 || !one.ConfigsHidden || one.CanDelete {
		t.Errorf("alice's orders = %+v", one)
	}
	var page recordsPage
	e.getAs(t, "/api/v1/topics/orders/partitions/0/records", alice, apw, &page)
	if len(page.Records) != 5 || string(page.Records[4].Value) != "orders-value" || string(page.Records[0].Key) != "a" {
		t.Fatalf("alice's orders records = %+v", page)
	}
	for _, p := range []string{
		"/api/v1/topics/secret", "/api/v1/topics/secret/partitions",
		"/api/v1/topics/secret/partitions/0/records",
		"/api/v1/topics/no-such-topic/partitions/0/records", // a refusal, not a 404: existence is not told
		"/api/v1/groups/hidden",
	} {
		r := e.do(t, "GET", p, alice, apw, "")
		var msg struct{ Error string }
		json.Unmarshal([]byte(r.body), &msg)
		if r.code != http.StatusForbidden || !strings.HasPrefix(msg.Error, "user alice may not ") || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s as alice = %d %s", p, r.code, r.body)
		}
	}
	if r := e.do(t, "GET", "/api/v1/topics/secret/partitions/0/records", alice, apw, ""); !strings.Contains(r.body, `may not READ topic \"secret\"`) {
		t.Errorf("secret records refusal: %s", r.body)
	}
	// Groups: only billing, with only the offsets of topics alice may describe.
	var gs struct {
		Groups []struct {
			ID     string
			Topics int
			Lag    int64
		}
	}
	e.getAs(t, "/api/v1/groups", alice, apw, &gs)
	if len(gs.Groups) != 1 || gs.Groups[0].ID != "billing" || gs.Groups[0].Topics != 1 || gs.Groups[0].Lag != 3 {
		t.Fatalf("alice's groups = %+v", gs)
	}
	var g struct{ Group broker.GroupInfo }
	e.getAs(t, "/api/v1/groups/billing", alice, apw, &g)
	if len(g.Group.Offsets) != 1 || g.Group.Offsets[0].Topic != "orders" || g.Group.Lag != 3 {
		t.Fatalf("alice's billing = %+v", g.Group)
	}
	// Charts: per-topic series only for orders.
	(&env{srv: e.srv}).waitSamples(t, 2)
	var hist Series
	e.getAs(t, "/api/v1/history?prefix=topic/,group/&series=produce.records", alice, apw, &hist)
	if _, ok := hist.Series[sProduceRecords]; !ok {
		t.Errorf("alice's history lacks %s: %v", sProduceRecords, keys(hist.Series))
	}
	for name := range hist.Series {
		if strings.Contains(name, "secret") || strings.Contains(name, "hidden") {
			t.Errorf("alice's history holds %s", name)
		}
	}
	if _, ok := hist.Series[topicSeries("orders", "in.records")]; !ok {
		t.Errorf("alice's history lacks orders: %v", keys(hist.Series))
	}
	// Admin actions need what Kafka requires; alice has none of it.
	for _, a := range []struct{ method, path, body, want string }{
		{"POST", "/api/v1/topics", `{"name":"new-topic"}`, `may not CREATE topic \"new-topic\"`},
		{"DELETE", "/api/v1/topics/orders", "", `may not DELETE topic \"orders\"`},
		{"POST", "/api/v1/groups/billing/reset", `{"topic":"orders","to":"earliest"}`, `may not READ group \"billing\"`},
	} {
		r := e.do(t, a.method, a.path, alice, apw, a.body)
		if r.code != http.StatusForbidden || !strings.Contains(r.body, a.want) {
			t.Errorf("%s %s as alice = %d %s, want 403 %s", a.method, a.path, r.code, r.body, a.want)
		}
	}
	if _, ok := e.b.Topic("new-topic"); ok {
		t.Fatal("a refused create created the topic")
	}

	// The superuser sees and does everything.
	e.getAs(t, "/api/v1/topics", admin, spw, &ts)
	if !slices.Equal(names(ts), []string{"orders", "secret"}) || ts.Topics[1].CleanupPolicy != "delete" || ts.Topics[1].ConfigsHidden {
		t.Fatalf("admin's topics = %+v", ts)
	}
	e.getAs(t, "/api/v1/topics/secret/partitions/0/records?limit=2", admin, spw, &page)
	if len(page.Records) != 2 || string(page.Records[1].Value) != "secret-value" || page.Records[1].Offset != 4 {
		t.Fatalf("admin's secret records = %+v", page)
	}
	e.getAs(t, "/api/v1/groups", admin, spw, &gs)
	if len(gs.Groups) != 2 || gs.Groups[0].Lag != 3+4 {
		t.Fatalf("admin's groups = %+v", gs)
	}
	if r := e.do(t, "POST", "/api/v1/topics", admin, spw, `{"name":"new-topic","partitions":2}`); r.code != http.StatusCreated {
		t.Fatalf("create as admin = %d %s", r.code, r.body)
	}
	if r := e.do(t, "POST", "/api/v1/groups/hidden/reset", admin, spw, `{"topic":"secret","to":"latest"}`); r.code != http.StatusOK {
		t.Fatalf("reset as admin = %d %s", r.code, r.body)
	}
	e.getAs(t, "/api/v1/groups/hidden", admin, spw, &g)
	for _, o := range g.Group.Offsets {
		if o.Topic == "secret" && o.Committed != 5 {
			t.Errorf("hidden's secret offset after reset = %d, want 5", o.Committed)
		}
	}
	if r := e.do(t, "DELETE", "/api/v1/topics/new-topic", admin, spw, ""); r.code != http.StatusOK {
		t.Fatalf("delete as admin = %d %s", r.code, r.body)
	}

	// Granting alice what Kafka requires lets her do it.
	ctx := ctxFor(t)
	grants := []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("alice-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpCreate, kadm.OpDelete),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("billing").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead),
	}
	for _, a := range grants {
		if r, err := e.adm.CreateACLs(ctx, a); err != nil || r[0].Err != nil {
			t.Fatalf("CreateACLs: %v %v", err, r)
		}
	}
	if r := e.do(t, "POST", "/api/v1/topics", alice, apw, `{"name":"alice-scratch"}`); r.code != http.StatusCreated {
		t.Fatalf("create with CREATE on the topic = %d %s", r.code, r.body)
	}
	if r := e.do(t, "DELETE", "/api/v1/topics/alice-scratch", alice, apw, ""); r.code != http.StatusOK {
		t.Fatalf("delete with DELETE on the topic = %d %s", r.code, r.body)
	}
	if r := e.do(t, "POST", "/api/v1/groups/billing/reset", alice, apw, `{"topic":"orders","to":"earliest"}`); r.code != http.StatusOK {
		t.Fatalf("reset with READ on group and topic = %d %s", r.code, r.body)
	}
	if r := e.do(t, "POST", "/api/v1/groups/billing/reset", alice, apw, `{"topic":"secret","to":"earliest"}`); r.code != http.StatusForbidden || !strings.Contains(r.body, `may not READ topic \"secret\"`) {
		t.Fatalf("reset on a topic without READ = %d %s", r.code, r.body)
	}
}

// TestConsoleAuthorizationWithoutSASL: with authorization on but no SASL
// listener there is no login, and the console applies the ACLs of
// User:ANONYMOUS, as the broker does for a PLAINTEXT client.
func TestConsoleAuthorizationWithoutSASL(t *testing.T) {
	e := newEnv(t, envOpt{brokerOpts: []broker.Opt{broker.Authorization(true)}})
	e.createTopic(t, "open", 1)
	e.createTopic(t, "closed", 1)
	adm := kadm.NewClient(e.internalClient(t))
	if r, err := adm.CreateACLs(ctxFor(t), kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Topics("open").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe)); err != nil || r[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, r)
	}
	var ts struct{ Topics []topicRow }
	e.getJSON(t, "/api/v1/topics", &ts)
	if len(ts.Topics) != 1 || ts.Topics[0].Name != "open" {
		t.Fatalf("anonymous topics = %+v", ts)
	}
	if code, body := e.get(t, "/api/v1/topics/open/partitions/0/records"); code != http.StatusForbidden || !strings.Contains(body, "user ANONYMOUS may not READ") {
		t.Fatalf("anonymous records without READ = %d %s", code, body)
	}
}

// internalClient is a Kafka client on the broker's in-process connection.
func (e *env) internalClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("internal:0"), kgo.Dialer(func(context.Context, string, string) (net.Conn, error) { return e.b.InternalConn() })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSecureConsoleInBrowser: logged in as alice, the console in
// Chromium lists only the topic her ACLs let her describe, with its
// configuration marked hidden, and browses its records.
func TestSecureConsoleInBrowser(t *testing.T) {
	e := newSecureEnv(t)
	e.setup(t)
	b := newBrowser(t, e.url)
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	login := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:alice-pw"))
	if _, err := chromedp.Call(b.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": login}}); err != nil {
		t.Fatal(err)
	}
	b.open("#/topics")
	table := b.text("#topics-table")
	if !strings.Contains(table, "orders") || strings.Contains(table, "secret") || !strings.Contains(table, "hidden") {
		t.Errorf("alice's topics table: %s", table)
	}
	if s := b.text("#status"); !strings.Contains(s, "alice") {
		t.Errorf("status bar does not name alice: %s", s)
	}
	b.noErrors("topics")
	b.open("#/topics/orders")
	b.wait(`document.querySelectorAll('#mb-table tr[data-offset]').length === 5`)
	wantRange(t, b.offsets(), 0, 5)
	if s := b.text("#configs"); !strings.Contains(s, "DESCRIBE_CONFIGS") {
		t.Errorf("configs section: %s", s)
	}
	if n := eval[int](b, `[...document.querySelectorAll('button')].filter(x => x.textContent === "Delete topic").length`); n != 0 {
		t.Errorf("the page offers alice Delete topic (%d buttons) without DELETE on it", n)
	}
	b.screenshot("topic-as-alice")
	b.noErrors("topic")

	// The superuser is offered Delete topic on the same page.
	login = "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:admin-secret"))
	if _, err := chromedp.Call(b.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": login}}); err != nil {
		t.Fatal(err)
	}
	b.open("#/topics/secret")
	b.wait(`document.querySelectorAll('#mb-table tr[data-offset]').length === 5`)
	if n := eval[int](b, `[...document.querySelectorAll('button')].filter(x => x.textContent === "Delete topic").length`); n != 1 {
		t.Errorf("the page offers the superuser %d Delete topic buttons, want 1", n)
	}
	b.noErrors("topic as admin")
}
