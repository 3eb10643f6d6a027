package broker_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

// startSASLOnly starts a broker whose only listener is SASL_SSL, with
// authorization on and the bootstrap superuser admin/admin-secret.
func startSASLOnly(t *testing.T) (*broker.Broker, *brokertest.Certs) {
	t.Helper()
	certs := brokertest.NewCerts(t, "sluice-test-ca")
	b := brokertest.Secure(t, certs, broker.Listeners(broker.Listener{Protocol: broker.SASLSSL, Addr: "127.0.0.1:0"}))
	return b, certs
}

func internalClient(t *testing.T, b *broker.Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers("internal:0"),
		kgo.Dialer(func(context.Context, string, string) (net.Conn, error) { return b.InternalConn() }),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestInternalConn: the in-process connection reaches a broker whose
// only listener is SASL_SSL, needs neither TLS nor SASL, and is not
// subject to ACLs (no ACL exists, and it produces, consumes and
// administers), while a SASL user without ACLs is refused.
func TestInternalConn(t *testing.T) {
	b, certs := startSASLOnly(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := internalClient(t, b, kgo.DefaultProduceTopic("internal"))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "internal"); err != nil {
		t.Fatalf("create over the internal connection: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v1")}, &kgo.Record{Value: []byte("v2")}).FirstErr(); err != nil {
		t.Fatalf("produce over the internal connection: %v", err)
	}
	rd := internalClient(t, b, kgo.ConsumeTopics("internal"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 2 {
		fs := rd.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume over the internal connection: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if got[0] != "v1" || got[1] != "v2" {
		t.Fatalf("consumed %q", got)
	}
	// The same broker refuses a SASL user that no ACL names.
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "nobody", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw"}}); err != nil {
		t.Fatal(err)
	}
	user, err := kgo.NewClient(kgo.SeedBrokers(b.ListenerAddr(broker.SASLSSL)), kgo.DialTLSConfig(certs.ClientTLS(t, "")),
		kgo.SASL(scram.Auth{User: "nobody", Pass: "pw"}.AsSha256Mechanism()), kgo.DefaultProduceTopic("internal"), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close()
	if err := user.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("a user without ACLs produced")
	}
}

// TestInternalConnClosedWithBroker: Close ends the internal connections
// (goleak in TestMain would see their goroutines otherwise) and refuses
// new ones.
func TestInternalConnClosedWithBroker(t *testing.T) {
	b, _ := startSASLOnly(t)
	nc, err := b.InternalConn()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("the internal connection still reads after Close")
	}
	if _, err := b.InternalConn(); err == nil {
		t.Fatal("InternalConn after Close succeeded")
	}
	unstarted, err := broker.New(broker.DataDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer unstarted.Close()
	if _, err := unstarted.InternalConn(); err == nil {
		t.Fatal("InternalConn before Start succeeded")
	}
}

// TestEmbeddedSecurityAPI: SASLEnabled, CheckPassword, LoginFailed and
// Allowed answer as the broker's Kafka path does.
func TestEmbeddedSecurityAPI(t *testing.T) {
	plain := brokertest.Start(t)
	if plain.SASLEnabled() || plain.AuthorizationEnabled() {
		t.Fatal("a PLAINTEXT broker reports SASL or authorization on")
	}
	if !plain.Allowed("anyone", "10.0.0.1", kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, "t") {
		t.Fatal("Allowed is false with authorization off")
	}
	b, _ := startSASLOnly(t)
	if !b.SASLEnabled() || !b.AuthorizationEnabled() {
		t.Fatal("a SASL_SSL broker with authorization does not say so")
	}
	if !b.CheckPassword("admin", "admin-secret") {
		t.Fatal("the bootstrap user's password is refused")
	}
	for _, bad := range [][2]string{{"admin", "wrong"}, {"admin", ""}, {"nobody", "admin-secret"}, {"", ""}} {
		if b.CheckPassword(bad[0], bad[1]) {
			t.Fatalf("CheckPassword(%q, %q) = true", bad[0], bad[1])
		}
	}
	d1, d2 := b.LoginFailed("10.9.9.9"), b.LoginFailed("10.9.9.9")
	if d1 <= 0 || d2 != 2*d1 || b.LoginFailed("10.9.9.8") != d1 {
		t.Fatalf("login failure delays %v, %v: want growing per address", d1, d2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(internalClient(t, b))
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	if err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}
	for _, c := range []struct {
		user string
		op   kmsg.ACLOperation
		rt   kmsg.ACLResourceType
		name string
		want bool
	}{
		{"alice", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "orders", true},
		{"alice", kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, "orders", true}, // implied by READ
		{"alice", kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, "orders", false},
		{"alice", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "other", false},
		{"bob", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "orders", false},
		{"admin", kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, "other", true}, // superuser
		{"admin", kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, "kafka-cluster", true},
	} {
		if got := b.Allowed(c.user, "127.0.0.1", c.op, c.rt, c.name); got != c.want {
			t.Errorf("Allowed(%s, %v, %v, %s) = %v, want %v", c.user, c.op, c.rt, c.name, got, c.want)
		}
	}
}
