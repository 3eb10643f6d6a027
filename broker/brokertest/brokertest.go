// Package brokertest starts Sluice brokers for tests.
package brokertest

import (
	"testing"

	"github.com/sluicedb/sluice/broker"
)

// Start starts a broker on a random port of 127.0.0.1 over a fresh
// temporary data directory, with opts applied after those defaults, and
// closes it when the test ends (failing the test if Close fails).
func Start(t testing.TB, opts ...broker.Opt) *broker.Broker {
	t.Helper()
	all := append([]broker.Opt{broker.DataDir(t.TempDir()), broker.ListenAddr("127.0.0.1:0")}, opts...)
	b, err := broker.New(all...)
	if err != nil {
		t.Fatalf("brokertest: broker.New: %v", err)
	}
	if err := b.Start(); err != nil {
		b.Close()
		t.Fatalf("brokertest: broker.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("brokertest: broker.Close: %v", err)
		}
	})
	return b
}

// Secure starts a broker with SSL and SASL_SSL listeners (and a
// PLAINTEXT one) on random ports, certificates from certs (client
// certificates verified against its CA), authorization on, the given
// superusers, and a bootstrap superuser admin/admin-secret; opts apply
// after those.
func Secure(t testing.TB, certs *Certs, opts ...broker.Opt) *broker.Broker {
	t.Helper()
	all := append([]broker.Opt{
		broker.Listeners(
			broker.Listener{Protocol: broker.Plaintext, Addr: "127.0.0.1:0"},
			broker.Listener{Protocol: broker.SSL, Addr: "127.0.0.1:0"},
			broker.Listener{Protocol: broker.SASLSSL, Addr: "127.0.0.1:0"},
		),
		broker.TLSFiles(certs.ServerCert, certs.ServerKey, certs.CAFile),
		broker.Authorization(true),
		broker.SuperUsers("admin"),
		broker.BootstrapUser("admin", "admin-secret"),
	}, opts...)
	return Start(t, all...)
}
