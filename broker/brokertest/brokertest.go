// Package brokertest starts real, durable Sluice brokers inside a test
// process, for testing code that talks Kafka: the same broker as `sluice
// serve` (storage, groups, transactions, ACLs), on a random port of
// 127.0.0.1 over a temporary data directory, closed when the test ends.
//
//   - Start: records are fsynced before they are acknowledged, as in
//     production (what a test of crash or restart behaviour wants).
//   - Fast: the same broker with fsync off, for tests that only need the
//     Kafka semantics; a broker restarted on the same directory (Restart)
//     still finds everything, since Close syncs.
//   - Faults: rules that fail a given API with an error code, delay it, or
//     drop the connection, so a test can exercise its client's error
//     handling (Faults.Opt passes them to Start or Fast).
//
// See examples/brokertest in the repository for a complete test.
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

// Fast is Start with fsync off (broker.FsyncNever): acknowledgements do
// not wait for the disk. Close still syncs, so a broker reopened on the
// same directory finds every record.
func Fast(t testing.TB, opts ...broker.Opt) *broker.Broker {
	t.Helper()
	return Start(t, append([]broker.Opt{broker.Fsync(broker.FsyncNever)}, opts...)...)
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
