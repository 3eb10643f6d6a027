package broker_test

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

type probeLog struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *probeLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *probeLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestTLSProbeIsNoAuthFailure opens and closes TCP connections to a TLS
// listener, as a health probe or the CLI's reachability check does: no
// INFO line, no authentication failure counted. A client that sends
// garbage instead of a ClientHello still counts.
func TestTLSProbeIsNoAuthFailure(t *testing.T) {
	certs := brokertest.NewCerts(t, "probe-ca")
	reg := prometheus.NewRegistry()
	var logs probeLog
	b := brokertest.Secure(t, certs, broker.Registerer(reg),
		broker.Logger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	addr := b.ListenerAddr(broker.SASLSSL)
	waitConns := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for gauge(t, reg, "sluice_broker_connections") != 0 {
			if time.Now().After(deadline) {
				t.Fatal("the probe connections never closed")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	// A full handshake, then a close: also no failure.
	tc, err := tls.Dial("tcp", addr, certs.ClientTLS(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	tc.Close()
	waitConns()
	if n := gauge(t, reg, "sluice_broker_authentication_failures_total"); n != 0 {
		t.Fatalf("probes counted %v authentication failures", n)
	}
	if strings.Contains(logs.String(), "TLS handshake") {
		t.Fatalf("probes logged at INFO:\n%s", logs.String())
	}

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	c.Close()
	// The connection count may still read 0 before the broker has
	// accepted this connection: wait for the failure itself, then for
	// the connection to close, and check that it counted once.
	deadline := time.Now().Add(30 * time.Second)
	for gauge(t, reg, "sluice_broker_authentication_failures_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("a non-TLS client was never counted as an authentication failure")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitConns()
	if n := gauge(t, reg, "sluice_broker_authentication_failures_total"); n != 1 {
		t.Fatalf("a non-TLS client counted %v authentication failures, want 1", n)
	}
}
