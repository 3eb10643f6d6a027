// Package brokertest starts Sluice brokers for tests.
package brokertest

import (
	"testing"

	"sluice/broker"
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
