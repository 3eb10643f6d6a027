package clientauth

import (
	"flag"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/broker/brokertest"
)

func TestConfigOpts(t *testing.T) {
	certs := brokertest.NewCerts(t, "clientauth-ca")
	cert, key := certs.Issue(t, "client", "carol", false)
	for _, tc := range []struct {
		name    string
		cfg     Config
		nOpts   int
		wantErr string
	}{
		{"plaintext", Config{}, 0, ""},
		{"tls via CA", Config{CAFile: certs.CAFile}, 1, ""},
		{"mutual TLS", Config{CAFile: certs.CAFile, CertFile: cert, KeyFile: key}, 1, ""},
		{"SCRAM default", Config{CAFile: certs.CAFile, User: "u", Password: "p"}, 2, ""},
		{"PLAIN", Config{User: "u", Password: "p", SASLMechanism: "plain"}, 1, ""},
		{"SCRAM-SHA-256", Config{User: "u", Password: "p", SASLMechanism: "SCRAM-SHA-256"}, 1, ""},
		{"unknown mechanism", Config{User: "u", SASLMechanism: "GSSAPI"}, 0, "--sasl-mechanism"},
		{"mechanism without user", Config{SASLMechanism: "PLAIN"}, 0, "--user"},
		{"cert without key", Config{CertFile: cert}, 0, "--tls-key"},
		{"missing CA file", Config{CAFile: "/nonexistent/ca.pem"}, 0, "--tls-ca"},
		{"CA file without PEM", Config{CAFile: key + ".nope"}, 0, "--tls-ca"},
	} {
		opts, err := tc.cfg.Opts()
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want one naming %s", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || len(opts) != tc.nOpts {
			t.Errorf("%s: %d opts, err %v; want %d", tc.name, len(opts), err, tc.nOpts)
		}
	}
}

func TestAddFlagsEnv(t *testing.T) {
	t.Setenv("SLUICE_TLS_CA", "ca.pem")
	t.Setenv("SLUICE_USER", "alice")
	t.Setenv("SLUICE_PASSWORD", "pw")
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse([]string{"--sasl-mechanism", "PLAIN", "--user", "bob"}); err != nil {
		t.Fatal(err)
	}
	if c.CAFile != "" || c.Password != "" {
		t.Fatalf("the environment shows as flag defaults: %+v", c)
	}
	c.FromEnv()
	if c.CAFile != "ca.pem" || c.User != "bob" || c.Password != "pw" || c.SASLMechanism != "PLAIN" {
		t.Fatalf("config %+v", c)
	}
	fs2 := flag.NewFlagSet("y", flag.ContinueOnError)
	var c2 Config
	c2.AddFlags(fs2, "password")
	if fs2.Lookup("password") != nil || fs2.Lookup("user") == nil {
		t.Fatal("skip did not skip --password")
	}
}

func TestACLSpecBuilder(t *testing.T) {
	for _, tc := range []struct {
		spec   ACLSpec
		create bool
		ok     bool
	}{
		{ACLSpec{AllowPrincipals: []string{"alice"}, Operations: []string{"read"}, Topics: []string{"t"}}, true, true},
		{ACLSpec{AllowPrincipals: []string{"alice"}, Operations: []string{"cluster-action"}, Cluster: true}, true, true},
		{ACLSpec{AllowPrincipals: []string{"alice"}, Operations: []string{"any"}, Topics: []string{"t"}}, true, false},
		{ACLSpec{Operations: []string{"read"}, Topics: []string{"t"}}, true, false},
		{ACLSpec{AllowPrincipals: []string{"a"}, Operations: []string{"read"}, Topics: []string{"t"}, PatternType: "match"}, true, false},
		{ACLSpec{}, false, true},
		{ACLSpec{Topics: []string{"t"}, PatternType: "match", Operations: []string{"read"}}, false, true},
		{ACLSpec{PatternType: "bogus"}, false, false},
	} {
		_, err := tc.spec.Builder(tc.create)
		if (err == nil) != tc.ok {
			t.Errorf("%+v create=%v: err %v, want ok=%v", tc.spec, tc.create, err, tc.ok)
		}
	}
}
