package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saslTest starts a broker with one SASL_PLAINTEXT listener, users
// admin (a superuser) and alice, and authorization as asked.
func saslTest(t *testing.T, authorize bool) *testBroker {
	t.Helper()
	tb := startTest(t, Listeners(Listener{Protocol: SASLPlaintext, Addr: "127.0.0.1:0"}),
		BootstrapUser("admin", "admin-secret"), Authorization(authorize), SuperUsers("User:admin"),
		opt(func(c *cfg) { c.authFailBase = time.Microsecond }))
	adm := kadm.NewClient(saslClient(t, tb, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	if _, err := adm.AlterUserSCRAMs(t.Context(), nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"}}); err != nil {
		t.Fatal(err)
	}
	return tb
}

func saslClient(t *testing.T, tb *testBroker, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tb.b.ListenerAddr(SASLPlaintext)), kgo.SASL(m), kgo.RetryTimeout(time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// tokenLogin reports whether a fresh client logs in with the token (a
// Metadata request answered).
func tokenLogin(t *testing.T, tb *testBroker, tok kadm.DelegationToken, sha512 bool) error {
	t.Helper()
	a := scram.Auth{User: tok.TokenID, Pass: base64.StdEncoding.EncodeToString(tok.HMAC), IsToken: true}
	m := a.AsSha256Mechanism()
	if sha512 {
		m = a.AsSha512Mechanism()
	}
	cl := saslClient(t, tb, m)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

// TestDelegationTokenLogin: a token created with kadm logs in over SCRAM
// with franz-go's tokenauth extension as its owner, may not create
// tokens itself, survives a restart, and stops working once expired.
func TestDelegationTokenLogin(t *testing.T) {
	tb := saslTest(t, false)
	ctx := t.Context()
	alice := kadm.NewClient(saslClient(t, tb, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	tok, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{MaxLifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Owner.Name != "alice" || tok.TokenRequesterPrincipal.Name != "alice" || tok.TokenID == "" || len(tok.HMAC) == 0 {
		t.Fatalf("token %+v", tok)
	}
	if got := tok.MaxTimestamp.Sub(tok.IssueTimestamp); got != time.Hour {
		t.Fatalf("max lifetime %v, want 1h", got)
	}
	if !tok.ExpiryTimestamp.Equal(tok.MaxTimestamp) {
		t.Fatalf("expiry %v, want the max %v (1h is under the 24h renew interval)", tok.ExpiryTimestamp, tok.MaxTimestamp)
	}
	for _, sha512 := range []bool{false, true} {
		if err := tokenLogin(t, tb, tok, sha512); err != nil {
			t.Fatalf("token login (sha512 %v): %v", sha512, err)
		}
	}
	// A wrong HMAC, or the token id as a plain user, fails.
	bad := tok
	bad.HMAC = append([]byte{}, tok.HMAC...)
	bad.HMAC[0] ^= 1
	if err := tokenLogin(t, tb, bad, false); err == nil {
		t.Fatal("a wrong HMAC logged in")
	}
	plain := saslClient(t, tb, scram.Auth{User: tok.TokenID, Pass: base64.StdEncoding.EncodeToString(tok.HMAC)}.AsSha256Mechanism())
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, plain); err == nil {
		t.Fatal("a token logged in without tokenauth")
	}

	// A token-authenticated connection may not use the token APIs.
	a := scram.Auth{User: tok.TokenID, Pass: base64.StdEncoding.EncodeToString(tok.HMAC), IsToken: true}
	viaToken := kadm.NewClient(saslClient(t, tb, a.AsSha256Mechanism()))
	if _, err := viaToken.CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Fatalf("create over a token login: %v", err)
	}

	// Describe shows the token to its owner, without the HMAC.
	ds, err := alice.DescribeDelegationTokens(ctx)
	if err != nil || len(ds) != 1 || ds[0].TokenID != tok.TokenID || len(ds[0].HMAC) != 0 || !ds[0].ExpiryTimestamp.Equal(tok.ExpiryTimestamp) {
		t.Fatalf("describe: %+v, %v", ds, err)
	}

	// Renew: only the owner or a renewer; a shorter period moves the expiry.
	admin := kadm.NewClient(saslClient(t, tb, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	if _, err := admin.RenewDelegationToken(ctx, tok.HMAC, time.Minute); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Fatalf("renew by another user: %v", err)
	}
	exp, err := alice.RenewDelegationToken(ctx, tok.HMAC, time.Minute)
	if err != nil || !exp.Before(tok.ExpiryTimestamp) || exp.Before(tok.IssueTimestamp.Add(time.Minute)) {
		t.Fatalf("renew for a minute: %v, %v", exp, err)
	}

	// The token survives a restart.
	tb.restart()
	if err := tokenLogin(t, tb, tok, false); err != nil {
		t.Fatalf("token login after restart: %v", err)
	}

	// Expired at once: the login fails and the token is gone.
	alice = kadm.NewClient(saslClient(t, tb, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	if _, err := alice.ExpireDelegationToken(ctx, tok.HMAC, -time.Millisecond); err != nil {
		t.Fatalf("expire: %v", err)
	}
	if err := tokenLogin(t, tb, tok, false); err == nil {
		t.Fatal("an expired token logged in")
	}
	if _, err := alice.RenewDelegationToken(ctx, tok.HMAC, time.Minute); !errors.Is(err, kerr.DelegationTokenNotFound) {
		t.Fatalf("renew after expire: %v", err)
	}
	if ds, err := alice.DescribeDelegationTokens(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("describe after expire: %+v, %v", ds, err)
	}
}

// TestDelegationTokenACLs: with authorization on, a token for another
// owner needs CREATE_TOKENS on that user, and describe shows another's
// token only with DESCRIBE on it; the token acts as its owner.
func TestDelegationTokenACLs(t *testing.T) {
	tb := saslTest(t, true)
	ctx := t.Context()
	adminCl := saslClient(t, tb, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	admin := kadm.NewClient(adminCl)
	alice := kadm.NewClient(saslClient(t, tb, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	bob := kadm.Principal{Type: "User", Name: "bob"}
	if _, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &bob}); !errors.Is(err, kerr.DelegationTokenAuthorizationFailed) {
		t.Fatalf("alice creating bob's token without CREATE_TOKENS: %v", err)
	}
	// kadm's ACL builder has no USER resources: the request by hand.
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeUser, ResourceName: "User:bob",
		ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:alice", Host: "*",
		Operation: kmsg.ACLOperationCreateTokens, PermissionType: kmsg.ACLPermissionTypeAllow}}
	if resp, err := ca.RequestWith(ctx, adminCl); err != nil || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateAcls: %+v, %v", resp, err)
	}
	if _, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &bob}); err != nil {
		t.Fatalf("alice creating bob's token with CREATE_TOKENS: %v", err)
	}
	// alice requested it, so she sees it; admin (a superuser) sees all.
	if ds, err := alice.DescribeDelegationTokens(ctx); err != nil || len(ds) == 0 || ds[0].Owner.Name != "bob" || ds[0].TokenRequesterPrincipal.Name != "alice" {
		t.Fatalf("alice describes: %+v, %v", ds, err)
	}
	admTok, err := admin.CreateDelegationToken(ctx, kadm.CreateDelegationToken{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := alice.DescribeDelegationTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.TokenID == admTok.TokenID {
			t.Fatal("alice sees admin's token without DESCRIBE on it")
		}
	}
	// admin's token acts as admin, a superuser: it may create a topic.
	a := scram.Auth{User: admTok.TokenID, Pass: base64.StdEncoding.EncodeToString(admTok.HMAC), IsToken: true}
	viaToken := kadm.NewClient(saslClient(t, tb, a.AsSha256Mechanism()))
	if _, err := viaToken.CreateTopic(ctx, 1, 1, nil, "made-by-token"); err != nil {
		t.Fatalf("create topic as admin's token: %v", err)
	}
}
