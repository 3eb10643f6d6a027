package integration

// Security integration tests: TLS, SASL_SSL (PLAIN, SCRAM-SHA-256/512),
// mutual TLS and ACLs, with franz-go, sarama and kcat (librdkafka)
// against a broker started by brokertest.Secure.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

type secured struct {
	b     *broker.Broker
	certs *brokertest.Certs
	sasl  string // SASL_SSL address
	ssl   string // SSL address
	plain string // PLAINTEXT address
}

func startSecured(t *testing.T, opts ...broker.Opt) *secured {
	t.Helper()
	certs := brokertest.NewCerts(t, "sluice-test-ca")
	b := brokertest.Secure(t, certs, opts...)
	return &secured{b: b, certs: certs, sasl: b.ListenerAddr(broker.SASLSSL), ssl: b.ListenerAddr(broker.SSL), plain: b.ListenerAddr(broker.Plaintext)}
}

// client connects over SASL_SSL with mech (nil: over SSL, with the
// client certificate in tlsCfg).
func (s *secured) client(t *testing.T, addr string, tlsCfg *tls.Config, mech sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg), kgo.RetryTimeout(5 * time.Second)}
	if mech != nil {
		all = append(all, kgo.SASL(mech))
	}
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (s *secured) admin(t *testing.T) *kadm.Client {
	cl := s.client(t, s.sasl, s.certs.ClientTLS(t, ""), scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	return kadm.NewClient(cl)
}

func addUser(t *testing.T, adm *kadm.Client, user, pw string) {
	t.Helper()
	res, err := adm.AlterUserSCRAMs(ctxT(t, 10*time.Second), nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pw},
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pw},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("AlterUserSCRAMs %s: %v", r.User, r.Err)
		}
	}
}

func createSecTopic(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	res, err := adm.CreateTopics(ctxT(t, 10*time.Second), 1, 1, nil, topic)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// produceConsume writes n records and reads them back with a consumer
// group, all with cl's credentials.
func produceConsume(t *testing.T, name string, mk func(opts ...kgo.Opt) *kgo.Client, topic string, n int) {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	p := mk()
	want := records(name, n)
	for _, r := range want {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(r.key), Value: []byte(r.value)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", name, err)
		}
	}
	c := mk(kgo.ConsumeTopics(topic), kgo.ConsumerGroup(name+"-group"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < n {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: consumed %d of %d: %v", name, len(got), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("%s: fetch: %v", name, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Key), name+"-") {
				got = append(got, string(r.Value))
			}
		})
	}
	for i, r := range want {
		if got[i] != r.value {
			t.Fatalf("%s: record %d = %q, want %q", name, i, got[i], r.value)
		}
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("%s: commit: %v", name, err)
	}
}

// TestSecureClientsKgo: franz-go over SASL_SSL with SCRAM-SHA-512,
// SCRAM-SHA-256 and PLAIN, and over SSL with a client certificate:
// produce, consume in a group, and admin requests.
func TestSecureClientsKgo(t *testing.T) {
	s := startSecured(t)
	adm := s.admin(t)
	createSecTopic(t, adm, "secure")
	addUser(t, adm, "alice", "alice-pw")
	if err := (func() error {
		_, err := adm.CreateACLs(ctxT(t, 10*time.Second), kadm.NewACLs().Allow("User:alice", "User:carol").AllowHosts().
			Topics("secure").Groups("alice-256-group", "alice-plain-group", "mtls-group").
			ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpAll))
		return err
	})(); err != nil {
		t.Fatal(err)
	}
	tlsCfg := s.certs.ClientTLS(t, "")
	for _, tc := range []struct {
		name string
		mech sasl.Mechanism
		addr string
		tls  *tls.Config
	}{
		{"admin-512", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism(), s.sasl, tlsCfg},
		{"alice-256", scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism(), s.sasl, tlsCfg},
		{"alice-plain", plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism(), s.sasl, tlsCfg},
		{"mtls", nil, s.ssl, s.certs.ClientTLS(t, "carol")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			produceConsume(t, tc.name, func(opts ...kgo.Opt) *kgo.Client { return s.client(t, tc.addr, tc.tls, tc.mech, opts...) }, "secure", 5)
		})
	}
	// Admin: the committed offsets and the ACLs are visible to the superuser.
	ctx := ctxT(t, 10*time.Second)
	offs, err := adm.FetchOffsets(ctx, "alice-plain-group")
	if err != nil || offs.Error() != nil {
		t.Fatalf("FetchOffsets: %v %v", err, offs.Error())
	}
	if o, ok := offs.Lookup("secure", 0); !ok || o.At != 15 {
		t.Fatalf("alice-plain-group committed %+v, want offset 15", o)
	}
	acls, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(acls[0].Described); n != 8 {
		t.Fatalf("DescribeACLs: %d bindings, want 8 (2 principals x 4 resources)", n)
	}
	users, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := users["alice"]; !ok || len(users) != 2 {
		t.Fatalf("DescribeUserSCRAMs = %v, want admin and alice", users)
	}
}

// apiVersionsFrame is a raw ApiVersions v0 request, correlation id 7.
func apiVersionsFrame() []byte {
	body := []byte{0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff}
	return binary.BigEndian.AppendUint32(nil, uint32(len(body))) // then body
}

// refused sends ApiVersions over nc and checks that no Kafka response
// comes back before the connection ends.
func refused(t *testing.T, what string, nc net.Conn) {
	t.Helper()
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	frame := append(apiVersionsFrame(), 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff)
	nc.Write(frame)
	got, err := io.ReadAll(nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the connection was not closed", what)
	}
	if len(got) >= 8 && binary.BigEndian.Uint32(got[4:]) == 7 {
		t.Fatalf("%s: got a Kafka response (%d bytes)", what, len(got))
	}
}

// TestSecureRefusals: a wrong password, an unknown user, a plaintext
// client on a TLS port and a client certificate from an unknown CA are
// all refused, and the broker keeps serving a good client throughout.
func TestSecureRefusals(t *testing.T) {
	s := startSecured(t)
	adm := s.admin(t)
	createSecTopic(t, adm, "still-served")
	addUser(t, adm, "dave", "right")
	good := s.client(t, s.sasl, s.certs.ClientTLS(t, ""), scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	served := func(step string) {
		t.Helper()
		if err := good.ProduceSync(ctxT(t, 10*time.Second), &kgo.Record{Topic: "still-served", Value: []byte(step)}).FirstErr(); err != nil {
			t.Fatalf("after %s, a good client is not served: %v", step, err)
		}
	}
	served("start")

	for _, tc := range []struct {
		name string
		mech sasl.Mechanism
	}{
		{"wrong password SCRAM", scram.Auth{User: "dave", Pass: "wrong"}.AsSha512Mechanism()},
		{"wrong password PLAIN", plain.Auth{User: "dave", Pass: "wrong"}.AsMechanism()},
		{"unknown user", scram.Auth{User: "nobody", Pass: "x"}.AsSha256Mechanism()},
	} {
		cl := s.client(t, s.sasl, s.certs.ClientTLS(t, ""), tc.mech)
		err := cl.Ping(ctxT(t, 20*time.Second))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s: Ping = %v, want SASL_AUTHENTICATION_FAILED", tc.name, err)
		}
		served(tc.name)
	}

	nc, err := net.Dial("tcp", s.ssl)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, "plaintext client on the SSL port", nc)
	served("plaintext on SSL")
	nc, err = net.Dial("tcp", s.sasl)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, "plaintext client on the SASL_SSL port", nc)
	served("plaintext on SASL_SSL")

	other := brokertest.NewCerts(t, "untrusted-ca")
	bad := other.ClientTLS(t, "mallory")
	bad.RootCAs = s.certs.ClientTLS(t, "").RootCAs // trusts the broker, but its own cert is from another CA
	tc, err := tls.Dial("tcp", s.ssl, bad)
	if err == nil {
		refused(t, "client certificate from an untrusted CA", tc)
	}
	served("untrusted client certificate")

	// A client without a certificate on the SSL listener (client
	// certificates required there).
	tc, err = tls.Dial("tcp", s.ssl, s.certs.ClientTLS(t, ""))
	if err == nil {
		refused(t, "no client certificate on the SSL listener", tc)
	}
	served("no client certificate")

	// A SASL listener refuses requests before authentication.
	tc, err = tls.Dial("tcp", s.sasl, s.certs.ClientTLS(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	frame := append([]byte{0, 3, 0, 1, 0, 0, 0, 7, 0xff, 0xff}, md.AppendTo(nil)...)
	tc.SetDeadline(time.Now().Add(30 * time.Second))
	tc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	if got, _ := io.ReadAll(tc); len(got) != 0 {
		t.Fatalf("Metadata before SASL authentication got %d bytes back", len(got))
	}
	served("Metadata before SASL")
}

// TestSecureACLs: a principal without ACLs sees and does nothing;
// READ on a topic and a group lets it consume and nothing more; a
// prefixed DENY overrides a literal ALLOW.
func TestSecureACLs(t *testing.T) {
	s := startSecured(t)
	adm := s.admin(t)
	ctx := ctxT(t, 30*time.Second)
	for _, topic := range []string{"orders", "payments", "ordinary"} {
		createSecTopic(t, adm, topic)
	}
	if err := s.client(t, s.sasl, s.certs.ClientTLS(t, ""), scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()).ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("o1")}, &kgo.Record{Topic: "ordinary", Value: []byte("x1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	addUser(t, adm, "bob", "bob-pw")
	bob := func(opts ...kgo.Opt) *kgo.Client {
		return s.client(t, s.sasl, s.certs.ClientTLS(t, ""), scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism(), opts...)
	}
	badm := kadm.NewClient(bob())

	// No ACLs: nothing visible, nothing allowed.
	topics, err := badm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 0 {
		t.Fatalf("bob without ACLs sees topics %v", topics.Names())
	}
	err = bob(kgo.RecordRetries(1), kgo.DisableIdempotentWrite()).ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("no")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob produce without ACLs = %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if res, err := badm.CreateTopics(ctx, 1, 1, nil, "bobs"); err == nil && !errors.Is(res.Error(), kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob create topic = %v, want TOPIC_AUTHORIZATION_FAILED", res.Error())
	}
	if _, err := badm.ListGroups(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := badm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny)); err != nil || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob DescribeACLs = %v %v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
	}
	if _, err := badm.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob DescribeUserSCRAMs = %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}

	// READ on orders and on group g: bob consumes, and nothing more.
	grant := kadm.NewACLs().Allow("User:bob").AllowHosts().Topics("orders").Groups("g").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead)
	if res, err := adm.CreateACLs(ctx, grant); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}
	c := bob(kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("g"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := c.PollFetches(ctx)
	if errs := fs.Errors(); len(errs) > 0 || fs.NumRecords() != 1 || string(fs.Records()[0].Value) != "o1" {
		t.Fatalf("bob consume with READ: %d records, errors %v", fs.NumRecords(), errs)
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("bob commit with READ on the group: %v", err)
	}
	topics, err = kadm.NewClient(bob()).ListTopics(ctx) // a new client: kadm caches metadata
	if err != nil || !slices.Equal(topics.Names(), []string{"orders"}) {
		t.Fatalf("bob with READ on orders lists %v (%v), want [orders]", topics.Names(), err)
	}
	err = bob(kgo.RecordRetries(1), kgo.DisableIdempotentWrite()).ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("no")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob produce with READ only = %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	other := bob(kgo.ConsumeTopics("payments"), kgo.ConsumerGroup("g"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if fs := other.PollFetches(pctx); fs.NumRecords() != 0 {
		t.Fatalf("bob read %d records of payments", fs.NumRecords())
	}
	wrongGroup := bob(kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("h"))
	fs = wrongGroup.PollFetches(pctx)
	var groupErr error
	fs.EachError(func(_ string, _ int32, err error) { groupErr = err })
	if !errors.Is(groupErr, kerr.GroupAuthorizationFailed) {
		t.Fatalf("bob joining group h = %v, want GROUP_AUTHORIZATION_FAILED", groupErr)
	}

	// A prefixed DENY on "ord" overrides the literal ALLOW on orders and
	// covers ordinary too; payments stays unaffected (and unreadable).
	if res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").AllowHosts().Topics("ordinary").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead)); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}
	deny := kadm.NewACLs().Deny("User:bob").DenyHosts().Topics("ord").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead)
	if res, err := adm.CreateACLs(ctx, deny); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs deny: %v %v", err, res)
	}
	ids, err := adm.ListTopics(ctx, "orders", "ordinary")
	if err != nil {
		t.Fatal(err)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxBytes = 11, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "orders", ids["orders"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	ft.Topic, ft.TopicID = "ordinary", ids["ordinary"].ID
	fetch.Topics = append(fetch.Topics, ft)
	fresp, err := fetch.RequestWith(ctx, bob())
	if err != nil {
		t.Fatal(err)
	}
	for _, ft := range fresp.Topics {
		if code := ft.Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("bob fetch of %s/%x after the prefixed DENY: error %d, want TOPIC_AUTHORIZATION_FAILED", ft.Topic, ft.TopicID, code)
		}
	}

	// Deleting the DENY restores the literal ALLOW.
	if res, err := adm.DeleteACLs(ctx, deny); err != nil || len(res) != 1 || len(res[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs: %v %+v", err, res)
	}
	if fresp, err = fetch.RequestWith(ctx, bob()); err != nil || fresp.Topics[0].Partitions[0].ErrorCode != 0 || fresp.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("bob fetch after deleting the DENY: %v %+v", err, fresp)
	}
}

// saramaSCRAM adapts xdg-go/scram to sarama's SCRAMClient.
type saramaSCRAM struct {
	hg   xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (s *saramaSCRAM) Begin(user, pw, authz string) error {
	c, err := s.hg.NewClient(user, pw, authz)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}
func (s *saramaSCRAM) Step(ch string) (string, error) { return s.conv.Step(ch) }
func (s *saramaSCRAM) Done() bool                     { return s.conv.Done() }

// TestSecureSarama: sarama over SASL_SSL with SCRAM-SHA-512 produces,
// consumes and lists topics; with a wrong password it is refused.
func TestSecureSarama(t *testing.T) {
	s := startSecured(t)
	adm := s.admin(t)
	createSecTopic(t, adm, "sarama-secure")
	cfg := func(pw string) *sarama.Config {
		c := saramaConfig()
		c.Net.TLS.Enable, c.Net.TLS.Config = true, s.certs.ClientTLS(t, "")
		c.Net.SASL.Enable, c.Net.SASL.Handshake = true, true
		c.Net.SASL.Version = sarama.SASLHandshakeV1
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		c.Net.SASL.User, c.Net.SASL.Password = "admin", pw
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{hg: xscram.SHA512} }
		c.Metadata.Retry.Max = 1
		return c
	}
	sp, err := sarama.NewSyncProducer([]string{s.sasl}, cfg("admin-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	want := records("sarama-sec", 5)
	for i, r := range want {
		if _, _, err := sp.SendMessage(saramaMsg("sarama-secure", r, i)); err != nil {
			t.Fatalf("sarama produce: %v", err)
		}
	}
	ca, err := sarama.NewClusterAdmin([]string{s.sasl}, cfg("admin-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	if ts, err := ca.ListTopics(); err != nil || ts["sarama-secure"].NumPartitions != 1 {
		t.Fatalf("sarama ListTopics: %v %v", ts, err)
	}
	c, err := sarama.NewConsumer([]string{s.sasl}, cfg("admin-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition("sarama-secure", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var got []rec
	timeout := time.After(20 * time.Second)
	for len(got) < len(want) {
		select {
		case m := <-pc.Messages():
			h := map[string]string{}
			for _, x := range m.Headers {
				h[string(x.Key)] = string(x.Value)
			}
			got = append(got, rec{key: string(m.Key), value: string(m.Value), headers: h, offset: m.Offset})
		case <-timeout:
			t.Fatalf("sarama consumed %d of %d", len(got), len(want))
		}
	}
	checkRecords(t, "sarama over SASL_SSL", want, got)
	if _, err := sarama.NewClient([]string{s.sasl}, cfg("wrong")); err == nil {
		t.Fatal("sarama with a wrong password connected")
	}
}

// TestSecureKcat: kcat (librdkafka) over SASL_SSL with SCRAM-SHA-512 and
// PLAIN, and over SSL with a client certificate; a wrong password is
// refused.
func TestSecureKcat(t *testing.T) {
	kcat := needKcat(t)
	s := startSecured(t)
	adm := s.admin(t)
	createSecTopic(t, adm, "kcat-secure")
	carolCert, carolKey := s.certs.Issue(t, "carol", "carol", false)
	if res, err := adm.CreateACLs(ctxT(t, 10*time.Second), kadm.NewACLs().Allow("User:carol").AllowHosts().Topics("kcat-secure").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite, kadm.OpRead)); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}
	saslArgs := func(mech, pw string) []string {
		return []string{"-b", s.sasl, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=" + mech,
			"-X", "sasl.username=admin", "-X", "sasl.password=" + pw, "-X", "ssl.ca.location=" + s.certs.CAFile}
	}
	mtls := []string{"-b", s.ssl, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + s.certs.CAFile,
		"-X", "ssl.certificate.location=" + carolCert, "-X", "ssl.key.location=" + carolKey}
	var sent []string
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"SCRAM-SHA-512", saslArgs("SCRAM-SHA-512", "admin-secret")},
		{"PLAIN", saslArgs("PLAIN", "admin-secret")},
		{"mTLS", mtls},
	} {
		v := "via-" + tc.name
		sent = append(sent, v)
		runKcat(t, kcat, v+"\n", append(tc.args, "-P", "-t", "kcat-secure", "-X", "acks=all")...)
		out := runKcat(t, kcat, "", append(tc.args, "-C", "-t", "kcat-secure", "-o", "beginning", "-e", "-f", "%s\n")...)
		if got := strings.Fields(out); !slices.Equal(got, sent) {
			t.Fatalf("kcat %s consumed %q, want %q", tc.name, got, sent)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errb bytes.Buffer
	cmd := kcatCmd(ctx, kcat, append(saslArgs("SCRAM-SHA-512", "wrong"), "-L", "-m", "5")...)
	cmd.Stderr = &errb
	if err := cmd.Run(); err == nil {
		t.Fatal("kcat with a wrong password listed metadata")
	}
	if !strings.Contains(errb.String(), "uthentication") {
		t.Fatalf("kcat with a wrong password: stderr does not mention authentication:\n%s", errb.String())
	}
}

func kcatCmd(ctx context.Context, kcat string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, kcat, args...)
}

// TestSecureReloadKeepsConnections: ReloadTLS (what SIGHUP does) swaps
// the certificate for new handshakes while an open connection keeps
// working.
func TestSecureReloadKeepsConnections(t *testing.T) {
	s := startSecured(t)
	adm := s.admin(t)
	createSecTopic(t, adm, "reload")
	cl := s.client(t, s.sasl, s.certs.ClientTLS(t, ""), scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	ctx := ctxT(t, 20*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reload", Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	peerCN := func() string {
		c, err := tls.Dial("tcp", s.sasl, s.certs.ClientTLS(t, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := peerCN(); cn != "sluice-test-server" {
		t.Fatalf("server certificate CN %q before reload", cn)
	}
	// A raw connection opened before the reload must keep working after it.
	open, err := tls.Dial("tcp", s.sasl, s.certs.ClientTLS(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	apiVersions := func() {
		t.Helper()
		open.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := open.Write(append(apiVersionsFrame(), 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff)); err != nil {
			t.Fatal(err)
		}
		var hdr [8]byte
		if _, err := io.ReadFull(open, hdr[:]); err != nil || binary.BigEndian.Uint32(hdr[4:]) != 7 {
			t.Fatalf("ApiVersions on the open connection: %v", err)
		}
		if _, err := io.CopyN(io.Discard, open, int64(binary.BigEndian.Uint32(hdr[:]))-4); err != nil {
			t.Fatal(err)
		}
	}
	apiVersions()
	// Overwrite the files the broker was started with, then reload.
	s.certs.Issue(t, "server", "sluice-reloaded-server", true)
	if err := s.b.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if cn := peerCN(); cn != "sluice-reloaded-server" {
		t.Fatalf("server certificate CN %q after reload, want the new one", cn)
	}
	apiVersions()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reload", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("the open connection failed after the reload: %v", err)
	}
	// A broken file keeps the old certificate.
	if err := os.WriteFile(s.certs.ServerCert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.b.ReloadTLS(); err == nil {
		t.Fatal("ReloadTLS accepted a broken certificate file")
	}
	if cn := peerCN(); cn != "sluice-reloaded-server" {
		t.Fatalf("after a failed reload the CN is %q", cn)
	}
}

// roundTrip sends one request over nc and decodes the response.
func roundTrip(t *testing.T, nc net.Conn, req kmsg.Request) kmsg.Response {
	t.Helper()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	body := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(req.GetVersion()))
	body = binary.BigEndian.AppendUint32(body, 42)
	body = append(body, 0xff, 0xff)
	if req.IsFlexible() {
		body = append(body, 0)
	}
	body = req.AppendTo(body)
	if _, err := nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
		t.Fatal(err)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		t.Fatal(err)
	}
	resp := make([]byte, binary.BigEndian.Uint32(hdr[:])-4)
	if _, err := io.ReadFull(nc, resp); err != nil {
		t.Fatal(err)
	}
	kr := req.ResponseKind()
	if kr.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		resp = resp[1:]
	}
	if err := kr.ReadFrom(resp); err != nil {
		t.Fatal(err)
	}
	return kr
}

// TestSecureListenersAdvertise: Metadata and FindCoordinator answer with
// the advertised address of the listener the client connected through;
// TLS below 1.2 is refused.
func TestSecureListenersAdvertise(t *testing.T) {
	certs := brokertest.NewCerts(t, "adv-ca")
	b := brokertest.Start(t,
		broker.Listeners(
			broker.Listener{Protocol: broker.Plaintext, Addr: "127.0.0.1:0", Advertise: "plain.example:1111"},
			broker.Listener{Protocol: broker.SSL, Addr: "127.0.0.1:0", Advertise: "tls.example:2222"}),
		broker.TLSFiles(certs.ServerCert, certs.ServerKey, ""))
	plain, err := net.Dial("tcp", b.ListenerAddr(broker.Plaintext))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	secure, err := tls.Dial("tcp", b.ListenerAddr(broker.SSL), certs.ClientTLS(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Close()
	for _, tc := range []struct {
		nc   net.Conn
		host string
		port int32
	}{{plain, "plain.example", 1111}, {secure, "tls.example", 2222}} {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 9
		mr := roundTrip(t, tc.nc, md).(*kmsg.MetadataResponse)
		if len(mr.Brokers) != 1 || mr.Brokers[0].Host != tc.host || mr.Brokers[0].Port != tc.port {
			t.Fatalf("Metadata brokers %+v, want %s:%d", mr.Brokers, tc.host, tc.port)
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorKey = 3, "g"
		fr := roundTrip(t, tc.nc, fc).(*kmsg.FindCoordinatorResponse)
		if fr.ErrorCode != 0 || fr.Host != tc.host || fr.Port != tc.port {
			t.Fatalf("FindCoordinator %+v, want %s:%d", fr, tc.host, tc.port)
		}
		dc := kmsg.NewPtrDescribeClusterRequest()
		dr := roundTrip(t, tc.nc, dc).(*kmsg.DescribeClusterResponse)
		if len(dr.Brokers) != 1 || dr.Brokers[0].Host != tc.host || dr.Brokers[0].Port != tc.port {
			t.Fatalf("DescribeCluster brokers %+v, want %s:%d", dr.Brokers, tc.host, tc.port)
		}
	}
	old := certs.ClientTLS(t, "")
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if c, err := tls.Dial("tcp", b.ListenerAddr(broker.SSL), old); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 client completed a handshake")
	}
}

// TestSecureBootstrapUserOnlyWhenEmpty: SLUICE_BOOTSTRAP_USER's user is
// created on a fresh store and never again once credentials exist.
func TestSecureBootstrapUserOnlyWhenEmpty(t *testing.T) {
	certs := brokertest.NewCerts(t, "boot-ca")
	dir := t.TempDir()
	start := func(pw string) *broker.Broker {
		b, err := broker.New(broker.DataDir(dir),
			broker.Listeners(broker.Listener{Protocol: broker.SASLSSL, Addr: "127.0.0.1:0"}),
			broker.TLSFiles(certs.ServerCert, certs.ServerKey, ""), broker.BootstrapUser("admin", pw))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		return b
	}
	login := func(b *broker.Broker, pw string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DialTLSConfig(certs.ClientTLS(t, "")),
			kgo.SASL(scram.Auth{User: "admin", Pass: pw}.AsSha256Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.Ping(ctxT(t, 20*time.Second))
	}
	b := start("first-pw")
	if err := login(b, "first-pw"); err != nil {
		t.Fatalf("bootstrap user cannot log in: %v", err)
	}
	b.Close()
	b = start("second-pw")
	defer b.Close()
	if err := login(b, "first-pw"); err != nil {
		t.Fatalf("after restart the first password fails: %v", err)
	}
	if err := login(b, "second-pw"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a second bootstrap replaced the password: %v", err)
	}
}

// TestSecureSaramaPlainV0: sarama with SaslHandshake v0 (bare SASL
// tokens after the handshake) and PLAIN produces over SASL_SSL.
func TestSecureSaramaPlainV0(t *testing.T) {
	s := startSecured(t)
	createSecTopic(t, s.admin(t), "v0")
	c := saramaConfig()
	c.Net.TLS.Enable, c.Net.TLS.Config = true, s.certs.ClientTLS(t, "")
	c.Net.SASL.Enable, c.Net.SASL.Handshake = true, true
	c.Net.SASL.Version = sarama.SASLHandshakeV0
	c.ApiVersionsRequest = false // sarama's rule for v0
	c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	c.Net.SASL.User, c.Net.SASL.Password = "admin", "admin-secret"
	sp, err := sarama.NewSyncProducer([]string{s.sasl}, c)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if _, off, err := sp.SendMessage(&sarama.ProducerMessage{Topic: "v0", Partition: 0, Value: sarama.StringEncoder("bare tokens")}); err != nil || off != 0 {
		t.Fatalf("sarama PLAIN v0 produce: offset %d, %v", off, err)
	}
	c.Net.SASL.Password = "wrong"
	if cl, err := sarama.NewClient([]string{s.sasl}, c); err == nil {
		cl.Close()
		t.Fatal("sarama PLAIN v0 with a wrong password connected")
	}
}
