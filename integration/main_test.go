// Package integration drives a real Sluice broker on 127.0.0.1 with real
// Kafka clients (franz-go, sarama, segmentio/kafka-go, kcat) and compares
// it with kfake in benchmarks.
package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/broker"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// sarama and kafka-go keep package-level goroutines (metrics
		// tickers, connection reapers) that outlive their clients.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		goleak.IgnoreTopFunction("github.com/segmentio/kafka-go.(*Reader).run"),
		goleak.IgnoreAnyFunction("github.com/segmentio/kafka-go.(*conn).run"),
		goleak.IgnoreAnyFunction("github.com/segmentio/kafka-go.(*connPool).discover"),
		goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait"),
	)
}

// node is a broker under test that can be restarted on the same data
// directory and address.
type node struct {
	t    testing.TB
	dir  string
	addr string
	opts []broker.Opt
	b    *broker.Broker
}

func startNode(t testing.TB, opts ...broker.Opt) *node {
	t.Helper()
	n := &node{t: t, dir: t.TempDir(), addr: "127.0.0.1:0", opts: opts}
	n.start()
	t.Cleanup(func() { n.stop() })
	return n
}

func (n *node) start() {
	n.t.Helper()
	opts := append([]broker.Opt{broker.DataDir(n.dir), broker.ListenAddr(n.addr)}, n.opts...)
	b, err := broker.New(opts...)
	if err != nil {
		n.t.Fatalf("broker.New: %v", err)
	}
	if err := b.Start(); err != nil {
		b.Close()
		n.t.Fatalf("broker.Start: %v", err)
	}
	n.b = b
	n.addr = b.Addr() // restart on the same port
}

func (n *node) stop() {
	if n.b != nil {
		if err := n.b.Close(); err != nil {
			n.t.Errorf("broker.Close: %v", err)
		}
		n.b = nil
	}
}

func (n *node) restart() {
	n.t.Helper()
	n.stop()
	n.start()
}

// needKcat returns kcat's path, skipping the test when it is absent —
// except under CI=true, where a missing kcat fails the test so that CI
// can never pass by skipping.
func needKcat(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kcat not found and CI=true: install Debian's kcat package")
		}
		t.Skip("kcat not installed (apt-get install kcat); skipping")
	}
	return p
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// rec is the record shape every client test writes and checks.
type rec struct {
	key, value string
	headers    map[string]string
	offset     int64
}

func records(prefix string, n int) []rec {
	out := make([]rec, n)
	for i := range out {
		out[i] = rec{
			key:     fmt.Sprintf("%s-key-%d", prefix, i),
			value:   fmt.Sprintf("%s-value-%d-%s", prefix, i, string(make([]byte, i%7))),
			headers: map[string]string{"h": fmt.Sprint(i), "client": prefix},
			offset:  int64(i),
		}
	}
	return out
}

func checkRecords(t *testing.T, client string, want, got []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: consumed %d records, want %d", client, len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.key != w.key || g.value != w.value || g.offset != w.offset {
			t.Fatalf("%s: record %d = {%q %q @%d}, want {%q %q @%d}", client, i, g.key, g.value, g.offset, w.key, w.value, w.offset)
		}
		if len(g.headers) != len(w.headers) {
			t.Fatalf("%s: record %d headers %v, want %v", client, i, g.headers, w.headers)
		}
		for k, v := range w.headers {
			if g.headers[k] != v {
				t.Fatalf("%s: record %d header %q = %q, want %q", client, i, k, g.headers[k], v)
			}
		}
	}
}

func hostPort(t testing.TB, addr string) (string, string) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return h, p
}
