package broker

// Test helpers shared by the package's tests: the one way to start a
// broker (newBroker, or startTest for one a test restarts on the same
// directory and port) and the one polling helper (WaitFor).

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// newBroker starts a broker with opts on dir and closes it at the end of
// the test unless the test closed it first.
func newBroker(t testing.TB, dir string, opts ...Opt) *Broker {
	t.Helper()
	b := openBroker(t, dir, "127.0.0.1:0", opts...)
	t.Cleanup(func() { b.Close() })
	return b
}

// openBroker is the one way the tests start a broker: New on dir,
// listening on addr (port 0: any), then Start.
func openBroker(t testing.TB, dir, addr string, opts ...Opt) *Broker {
	t.Helper()
	b, err := New(append([]Opt{DataDir(dir), ListenAddr(addr)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := b.Start(); err != nil {
		b.Close()
		t.Fatalf("Start: %v", err)
	}
	return b
}

// testBroker is a broker that a test can restart on the same directory
// and port.
type testBroker struct {
	t    testing.TB
	dir  string
	addr string
	opts []Opt
	b    *Broker
}

func startTest(t testing.TB, opts ...Opt) *testBroker {
	t.Helper()
	tb := &testBroker{t: t, dir: t.TempDir(), addr: "127.0.0.1:0", opts: opts}
	tb.start()
	t.Cleanup(tb.stop)
	return tb
}

func (tb *testBroker) start() {
	tb.t.Helper()
	tb.b = openBroker(tb.t, tb.dir, tb.addr, tb.opts...)
	tb.addr = tb.b.Addr()
}

func (tb *testBroker) stop() {
	if tb.b != nil {
		if err := tb.b.Close(); err != nil {
			tb.t.Errorf("Close: %v", err)
		}
		tb.b = nil
	}
}

func (tb *testBroker) restart() {
	tb.t.Helper()
	tb.stop()
	tb.start()
}

func (tb *testBroker) client(opts ...kgo.Opt) *kgo.Client {
	tb.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tb.addr)}, opts...)...)
	if err != nil {
		tb.t.Fatalf("kgo.NewClient: %v", err)
	}
	tb.t.Cleanup(cl.Close)
	return cl
}

// WaitFor polls cond until it holds or the (generous) deadline passes.
// Exported for the package's external tests (broker_test), it exists only
// in test builds.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
