package main

import (
	"os"
	"testing"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

// TestUserCreateWithLoginFlags gives the login as flags (--user,
// --password), as every client command allows, and the new user's
// password with --new-password: the two no longer collide, and the new
// user can log in.
func TestUserCreateWithLoginFlags(t *testing.T) {
	for _, v := range []string{"SLUICE_USER", "SLUICE_PASSWORD", "SLUICE_NEW_PASSWORD"} {
		if old, ok := os.LookupEnv(v); ok {
			os.Unsetenv(v)
			t.Cleanup(func() { os.Setenv(v, old) })
		}
	}
	certs := brokertest.NewCerts(t, "user-flags-ca")
	b := brokertest.Secure(t, certs)
	conn := []string{"-b", b.ListenerAddr(broker.SASLSSL), "--tls-ca", certs.CAFile}
	r := ok(t, "", append([]string{"user", "create", "carol", "--new-password", "carol-secret", "--user", "admin", "--password", "admin-secret"}, conn...)...)
	if r.stdout != "created user carol\n" {
		t.Fatalf("user create printed %q", r.stdout)
	}
	ok(t, "", append([]string{"topic", "list", "--user", "carol", "--password", "carol-secret"}, conn...)...)
	fails(t, 2, "--new-password", "", append([]string{"user", "create", "dave", "--user", "admin", "--password", "admin-secret"}, conn...)...)
}
